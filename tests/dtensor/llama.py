"""A Llama-style transformer in the shape of PyTorch's TP tutorial model (pytorch/examples' llama2_model):
token embedding, blocks of RMSNorm → attention (wq/wk/wv/wo, rotary positions, causal SDPA) and RMSNorm →
SwiGLU feed-forward (w1/w2/w3), a final norm and output projection. Rotary positions are applied in their real
form (rotate half), since kernbench has no complex dtype. Written here for the tests and the dtensor_tp bench.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LlamaArgs:
    dim: int = 64
    n_layers: int = 1
    n_heads: int = 4
    vocab_size: int = 128
    ffn_hidden: int = 128
    max_seq_len: int = 32
    norm_eps: float = 1e-5


def build(torch, args: LlamaArgs):
    """The model class for the run's torch, made on the current device."""
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        first, second = x[..., :half], x[..., half:]
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_heads, self.head_dim = args.n_heads, args.dim // args.n_heads
            self.wq = nn.Linear(args.dim, args.dim, bias=False)
            self.wk = nn.Linear(args.dim, args.dim, bias=False)
            self.wv = nn.Linear(args.dim, args.dim, bias=False)
            self.wo = nn.Linear(args.dim, args.dim, bias=False)

        def forward(self, x, cos, sin):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
            xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
            xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
            out = F.scaled_dot_product_attention(rotate(xq, cos, sin), rotate(xk, cos, sin), xv, is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(args.dim, args.ffn_hidden, bias=False)
            self.w2 = nn.Linear(args.ffn_hidden, args.dim, bias=False)
            self.w3 = nn.Linear(args.dim, args.ffn_hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm = RMSNorm(args.dim, args.norm_eps)
            self.attention = Attention()
            self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
            self.feed_forward = FeedForward()

        def forward(self, x, cos, sin):
            h = x + self.attention(self.attention_norm(x), cos, sin)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
            self.layers = nn.ModuleList([Block() for _ in range(args.n_layers)])
            self.norm = RMSNorm(args.dim, args.norm_eps)
            self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
            head_dim = args.dim // args.n_heads
            inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            angles = torch.arange(args.max_seq_len).float().unsqueeze(1) * inv.unsqueeze(0)
            angles = torch.cat([angles, angles], dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

        def forward(self, tokens):
            seqlen = tokens.shape[1]
            h = self.tok_embeddings(tokens)
            cos, sin = self.cos[:seqlen], self.sin[:seqlen]
            for layer in self.layers:
                h = layer(h, cos, sin)
            return self.output(self.norm(h))

    return Transformer
