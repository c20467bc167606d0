"""Self-supervised runs (SimCLR and SimSiam, studies 4-5): the ResNets (``resnet``), training
(``training``), kNN, probe and OOD evaluation (``evaluation``), the NORMS interventions
(``interventions``) and study 4's simulations (``simulations``)."""
