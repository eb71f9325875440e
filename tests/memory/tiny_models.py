"""Small real models for end-to-end memory tests (traced through gpuwise's real tracer)."""

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, aten_attention: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.aten_attention = aten_attention
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        dropout_p = 0.1 if self.training else 0.0
        if self.aten_attention:
            # Straight to the aten op, past the tracer's F.scaled_dot_product_attention stand-in: with
            # dropout the CPU takes SDPA's math path (the attention matrix is materialised).
            a = torch.ops.aten.scaled_dot_product_attention(q, k, v, None, dropout_p)
        else:
            a = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 2,
                 aten_attention: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, aten_attention) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def transformer(batch_size: int = 2, seq_len: int = 32):
    model = TinyTransformer()
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    return model, ids, lambda logits: logits.float().logsumexp(-1).mean()


def transformer_aten_attention(batch_size: int = 2, seq_len: int = 32):
    model = TinyTransformer(aten_attention=True)
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    return model, ids, lambda logits: logits.float().logsumexp(-1).mean()


def convnet(batch_size: int = 2, image_size: int = 32):
    layers = []
    channels = 3
    for width in (16, 32, 32):
        layers += [nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        channels = width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))
    return model, torch.zeros(batch_size, 3, image_size, image_size)


def embedding_lookup(batch_size: int = 8, seq_len: int = 2048):
    """Liger's Llama embedding benchmark config at its largest vocabulary: 131,072 x 4,096, fp32, 8 x 2,048 ids."""
    model = nn.Embedding(131072, 4096)
    ids = torch.zeros(batch_size, seq_len, dtype=torch.long)
    return model, ids, lambda out: out.pow(2).sum()
