"""ResNet-18 with the CIFAR stem, SimCLR's network and SimSiam's (docs/studies.md, studies 4 and 5).

The CIFAR stem replaces ImageNet's 7x7 stride-2 convolution and max-pool by one 3x3 stride-1
convolution, so a 32x32 image reaches the last stage at 4x4 instead of 1x1. ``width_multiplier`` multiplies
every channel count (64, 128, 256, 512 at width 1): width 0.25 is a 16x cheaper network for CPU
runs, with 128-dimensional features instead of 512.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    """x -> conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut (1x1 conv-BN when the shape changes), ReLU."""

    def __init__(self, in_channels: int, channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(channels))
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        # in place: BatchNorm's backward needs its input, not its output, so the sum may overwrite it
        out += self.shortcut(x)
        return self.relu(out)


# The width multipliers a ResNet-18 is built at: from 1/128 (one channel in the first stage) to 16
# (8,192 features; wider is a typo, and 64 * width would overflow a float for absurd values).
RESNET_WIDTHS = (1 / 128, 16.0)


def first_stage_channels(width_multiplier: float) -> int:
    """c = round(64 * width_multiplier), at least 1 (1/128 gives 0.5, which round() takes to 0)."""
    return max(1, round(64 * width_multiplier))


class ResNet18(nn.Module):
    """ResNet-18 backbone with the CIFAR stem; ``forward`` returns the pooled features.

    Layout: conv3x3(C -> c, stride 1)-BN-ReLU, then four stages of two basic blocks with
    c, 2c, 4c, 8c channels and strides 1, 2, 2, 2, global average pooling;
    c = :func:`first_stage_channels` (width_multiplier). The output has ``feature_dim`` = 8c features
    (512 * width_multiplier). Initialisation as torchvision's
    ResNet: Kaiming-normal (fan-out) convolutions, BatchNorm weight 1 and bias 0; with
    ``zero_init_residual`` (torchvision's option, which the NORMS authors set: CLA/training/models.py,
    get_backbone [code]) the last BatchNorm of every residual branch starts with weight 0, so every
    block starts as its shortcut.
    """

    def __init__(self, channels: int = 3, width_multiplier: float = 1.0, *, zero_init_residual: bool = False):
        super().__init__()
        if not RESNET_WIDTHS[0] <= width_multiplier <= RESNET_WIDTHS[1]:
            raise ValueError(f"width_multiplier={width_multiplier} must be in [1/128, 16]: at least one channel "
                             "in the first stage")
        base = first_stage_channels(width_multiplier)
        self.stem = nn.Sequential(nn.Conv2d(channels, base, 3, padding=1, bias=False), nn.BatchNorm2d(base),
                                  nn.ReLU(inplace=True))
        stages, in_channels = [], base
        for multiple, stride in ((1, 1), (2, 2), (4, 2), (8, 2)):
            out_channels = base * multiple
            stages.append(nn.Sequential(BasicBlock(in_channels, out_channels, stride),
                                        BasicBlock(out_channels, out_channels, 1)))
            in_channels = out_channels
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = in_channels
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if zero_init_residual and isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.stages(self.stem(x))).flatten(1)


class Projector(nn.Module):
    """SimCLR's projection head: Linear(d -> hidden) [-BN] -ReLU- Linear(hidden -> out_dim).

    ``batch_norm=False`` (the default) gives the plain Linear-ReLU-Linear head of FLAT's code
    (FlatCLR models/utils.py: ProjectionHead, nonlinear mode, ``use_bn=False``) and of the NORMS
    authors' [code]; ``True`` SimCLR's Linear-BN-ReLU-Linear. The hidden Linear has no bias when a
    BatchNorm follows it (the BN shift replaces it).
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int = 128, *, batch_norm: bool = False):
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden_dim", hidden_dim), ("out_dim", out_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        layers = [nn.Linear(in_dim, hidden_dim, bias=not batch_norm)]
        if batch_norm:
            layers.append(nn.BatchNorm1d(hidden_dim))
        layers += [nn.ReLU(inplace=True), nn.Linear(hidden_dim, out_dim)]
        self.net = nn.Sequential(*layers)
        self.out_dim = out_dim

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)


class SimCLRNet(nn.Module):
    """Backbone plus projector: ``forward`` gives the raw projections z (not normalised), and
    ``features`` the backbone features h that kNN and the linear probe use."""

    def __init__(self, channels: int = 3, width_multiplier: float = 1.0, *, hidden_dim: int | None = None,
                 out_dim: int = 128, projector_bn: bool = False, zero_init_residual: bool = False):
        super().__init__()
        self.backbone = ResNet18(channels, width_multiplier, zero_init_residual=zero_init_residual)
        self.feature_dim = self.backbone.feature_dim
        self.projector = Projector(self.feature_dim, hidden_dim or self.feature_dim, out_dim, batch_norm=projector_bn)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projector(self.backbone(x))


class SimSiamNet(nn.Module):
    """SimSiam's network (Chen & He 2021) as the NORMS authors build it [code].

    - backbone: :class:`ResNet18` (CIFAR stem), d = 512 * ``width_multiplier`` features;
    - projector: Linear(d, D)-BN-ReLU-Linear(D, D)-BN-ReLU-Linear(D, D)-BN, D = ``dim`` (2048 in the paper);
    - predictor: Linear(D, D/4)-BN-ReLU-Linear(D/4, D), the bottleneck 2048 -> 512 -> 2048.

    ``forward`` returns ``(z, p)``, the projection and the prediction, neither normalised.
    Linear layers followed by BatchNorm have no bias (the BN shift replaces it) [ours].
    """

    def __init__(self, channels: int = 3, width_multiplier: float = 1.0, *, dim: int = 2048,
                 predictor_hidden: int | None = None, zero_init_residual: bool = False):
        super().__init__()
        for name, value in (("dim", dim), ("predictor_hidden", predictor_hidden or max(1, dim // 4))):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        hidden = predictor_hidden or max(1, dim // 4)
        self.backbone = ResNet18(channels, width_multiplier, zero_init_residual=zero_init_residual)
        self.feature_dim = self.backbone.feature_dim
        self.projector = nn.Sequential(
            nn.Linear(self.feature_dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim))
        self.predictor = nn.Sequential(nn.Linear(dim, hidden, bias=False), nn.BatchNorm1d(hidden),
                                       nn.ReLU(inplace=True),
                                       nn.Linear(hidden, dim))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.projector(self.backbone(x))
        return z, self.predictor(z)
