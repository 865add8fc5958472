"""What a dashboard process loads as it starts (serve.py), before its first view.

Importing altair took 0.45-0.85 s on the CI machine size: without this, the first view of
a chart page in a fresh dashboard process (Compare devices, 1.4 s at 1,000 devices) paid
it. The first chart altair checks against its schema is slower than the next ones, so one
small chart is made here as well. What is loaded by then lives as long as the process, so
it is taken out of the garbage collector's full passes (gc.freeze): after the preload
each one walked some 140,000 objects (56 ms), several times in a view that builds many
rows (0.1 s in Compare devices' sort of 3,000 rows).
"""

from __future__ import annotations

import gc
import time


def preload() -> float:
    """Import the pages' libraries, make one chart and freeze what is loaded; the seconds
    it took."""
    start = time.perf_counter()
    import altair as alt
    import pandas as pd

    import dashboard.cache  # noqa: F401  (the allowlists' modules)
    import dashboard.queries  # noqa: F401

    data = pd.DataFrame({"device": ["a"], "ms": [1.0]})
    alt.Chart(data).mark_bar().encode(x="ms:Q", y="device:N", tooltip=["device"]).to_dict()
    gc.collect()  # the garbage first: what is frozen is never freed
    gc.freeze()
    return time.perf_counter() - start
