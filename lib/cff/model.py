"""The CFF vision transformer: a stack of separately trainable layers (docs/studies.md, "The CFF model").

Two initialisations, by name (``INITS``):
- ``"cff"`` -- CFF's code (models/vit.py): positional embedding ``torch.randn`` (std 1); attention is
  ``nn.MultiheadAttention``, which draws its fused in-projection Xavier-uniform and zeroes the in- and
  out-projection biases. Every other layer keeps PyTorch's default init, as there.
- ``"trunc_normal"`` -- [ours] before issue 16, the usual ViT choice: position trunc-normal std 0.02,
  default ``nn.Linear`` init of the attention projections.
Our attention computes the same function as ``nn.MultiheadAttention`` (one fused q/k/v projection, the
fused SDPA kernel, an output projection), so only the initial values differ between the two.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

INITS = ("cff", "trunc_normal")


class EncoderBlock(nn.Module):
    """Pre-LN transformer block: x + MHA(LN x), then x + MLP(LN x); MLP E -> 2E -> E, GELU."""

    def __init__(self, dim: int, heads: int, init: str = "cff"):
        super().__init__()
        if dim % heads:
            raise ValueError(f"embed_dim={dim} must be divisible by heads={heads}")
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        if init == "cff":  # as nn.MultiheadAttention._reset_parameters: the [3E, E] in-projection as one matrix
            nn.init.xavier_uniform_(self.qkv.weight)
            nn.init.zeros_(self.qkv.bias)
            nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, e = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, e // self.heads)
        # [b, t, h, d] views transposed to [b, h, t, d]: the fused kernel takes the strides as they
        # are, which saves the permute-copy and concatenation of q, k, v in the backward pass
        q, k, v = (u.transpose(1, 2) for u in qkv.unbind(2))
        attended = F.scaled_dot_product_attention(q, k, v)  # fused kernel, no dropout
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, e))
        return x + self.mlp(self.norm2(x))


class PatchEmbedding(nn.Module):
    """Non-overlapping p x p patches -> Linear(C p^2 -> E) -> ReLU -> + learned position (no CLS)."""

    def __init__(self, channels: int, image_size: int, patch: int, dim: int, init: str = "cff"):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"patch={patch} must divide the image size {image_size}")
        self.patch = patch
        self.linear = nn.Linear(channels * patch * patch, dim)
        self.position = nn.Parameter(torch.zeros(1, (image_size // patch) ** 2, dim))
        if init == "cff":
            nn.init.normal_(self.position, std=1.0)
        else:
            nn.init.trunc_normal_(self.position, std=0.02)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        p = self.patch
        b, c, h, w = images.shape
        patches = images.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * p * p)
        return F.relu(self.linear(patches)) + self.position


class CFFViT(nn.Module):
    """L separately trained layers: layer 0 = patch embedding + block, layers 1..L-1 = one block.

    ``forward`` returns each layer's token output; training detaches between layers.
    """

    def __init__(self, *, channels: int, image_size: int, patch: int = 4, embed_dim: int = 128,
                 heads: int = 4, layers: int = 8, init: str = "cff"):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers={layers} must be >= 1")
        if init not in INITS:
            raise ValueError(f"init={init!r} is not known; choose one of {', '.join(INITS)}")
        first = nn.Sequential(PatchEmbedding(channels, image_size, patch, embed_dim, init),
                              EncoderBlock(embed_dim, heads, init))
        self.layers = nn.ModuleList([first] + [EncoderBlock(embed_dim, heads, init) for _ in range(layers - 1)])
        self.embed_dim = embed_dim
        self.tokens = (image_size // patch) ** 2  # tokens per image after the patch embedding

    def forward(self, images: torch.Tensor, *, local: bool = False) -> list[torch.Tensor]:
        """Token outputs of every layer; ``local=True`` cuts the graph between layers."""
        outputs, h = [], images
        for layer in self.layers:
            h = layer(h.detach() if local else h)
            outputs.append(h)
        return outputs

    @torch.inference_mode()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Mean-pooled last-layer tokens: the representation the linear probe reads."""
        h = images
        for layer in self.layers:
            h = layer(h)
        return h.mean(dim=1)
