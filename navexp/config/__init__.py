"""One experiment's configuration: the typed schemas stored in Hydra's ConfigStore (``schemas``), the
size presets (``presets``), checks of a run's config that its schemas cannot express (``validation``),
the tools' command-line parsing (``cli``), configs of stored runs (``run_config``), evaluation suites as
config (``suites``) and the small Python API (``api``: ``compose_config``, ``make_env``).

May import: ``navexp.learn``, ``navexp.task``, ``navexp.sim``. Never analysis, the experiment layer
(training runs), sweep, deploy or the entry points.
"""
