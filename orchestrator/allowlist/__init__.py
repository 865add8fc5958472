"""Allowlists: per-model decisions from measured results, exported as TFLite's GPU
compatibility database (devicedb), CSV or JSON; or, per delegate (NNAPI, Hexagon,
XNNPACK), the same tree with `devicefarm.<delegate>.*` properties in a file of its own.

- `facts`: a device's facts as the list's `tflite.*` variables (canonicalised).
- `rules`: supported / unsupported (with a reason) / unknown, from aggregated evidence.
- `collect`: the evidence from the farm's database, grouped by the facts results ran with.
- `devicedb`: the decision tree, as a flatbuffer (database.fbs) or flatc's JSON.
- `reader`: walks a tree with a device's variables exactly as TFLite does.
- `export`: CSV and JSON.
"""
