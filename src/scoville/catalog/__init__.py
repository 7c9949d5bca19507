"""The shipped catalogs of systems and models: datasheet figures and HF configs read from ``scoville/data``.

Its own package, below everything that reads it: the simulator builds cost models from these entries, and the
measuring side (``power``: rated and all-in watts, price presets) and the emulator read the same entries, so
none of them has to import the simulator for a datasheet figure. Not to be confused with the catalog of runs
(``scoville.results.catalog``).
"""
