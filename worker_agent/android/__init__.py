"""Android phones on a lab host: discovery and facts over adb, the adb runner (the official
TFLite tools on the phone), and a protocol-true device simulator for tests.

adbutils is imported lazily (the `android` extra); the simulator needs only the standard
library and delegate_runtime.
"""
