"""One experiment's configuration and records: the typed config schemas stored in Hydra's
ConfigStore, validation (once per run), size presets, the tools' command-line parsing, run
directories and their lock, the reproducibility record, log writers (TensorBoard, W&B), stored-run
configs and evaluation suites as config, and the small Python API (``compose_config``, ``make_env``).

May import: ``navexp.learn``, ``navexp.task``, ``navexp.sim``. Never analysis, sweep or deploy.
"""
