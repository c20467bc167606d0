"""Contrastive forward-forward (CFF, studies 1-3): the ViT (``model``), its layer-local training and linear
probe (``training``), the seeds of a cell as one stacked model (``batched``) and the margin diagnostics
(``diagnostics``)."""
