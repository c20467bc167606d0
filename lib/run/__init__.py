"""The run pipeline: the results store (``results``), the local sweep (``sweep``) and each record's
provenance: the training function it names and the command that re-runs it (``provenance``)."""
