"""What every method and study stands on: parameter checks, typed configs, progress bars, the datasets and
their augmentation, the losses, optimisers, statistics and the verdict engine. Nothing here imports a method
(``lib.cff``, ``lib.ssl``, ``lib.collapse``), the run pipeline (``lib.run``) or a study."""
