"""A decoder-only LLM described from its HF config: parameters per component, FLOPs, KV cache.

Works for any llama-like or MoE decoder config (Llama, Qwen 1.5-3, Mistral/Mixtral, Gemma 2/3,
Phi-1.5/3/4, DeepSeek V2/V3 with MLA, GLM-4, InternLM2, Yi, Baichuan, GPT-NeoX). The linear layers
are listed with the names the HF implementation gives them (``q_proj``, ``w1``, ``query_key_value``),
so LoRA targets and quantization select the same layers here as on the real module.
Activation memory is in ``gpuwise.memory.llm_activations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

from gpuwise.workload.config_checks import HEAD_KEYS, HIDDEN_KEYS, LAYER_KEYS
from gpuwise.workload.decoder_configs import (sliding_window_layers, text_config, vision_tower_params,
                                             vllm_max_model_len)
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.llm_config import load_config, transformers_defaults, try_load_decoder_config

# Canonical roles of block linears; LoRA targets may name a role or the module's own name.
ROLE_ALIASES = {
    "q": ("q_proj", "q_a_proj", "q_b_proj"), "k": ("k_proj",), "v": ("v_proj",),
    "qkv": ("qkv_proj", "query_key_value", "W_pack", "wqkv", "kv_a_proj_with_mqa", "kv_b_proj"),
    "o": ("o_proj", "dense", "wo"), "gate": ("gate_proj", "w1"), "up": ("up_proj", "w3"),
    "gate_up": ("gate_up_proj", "dense_h_to_4h"), "down": ("down_proj", "w2", "dense_4h_to_h", "fc2"),
    "fc1": ("fc1",),
}
_KNOWN_TARGETS = set(ROLE_ALIASES).union(*ROLE_ALIASES.values())
_NON_GATED = {"phi", "gpt_neox", "gpt2", "gptj", "falcon", "opt", "bloom", "gpt_bigcode", "starcoder2", "mpt"}
_LAYERNORM = {"phi", "gpt_neox", "gpt2", "gptj", "falcon", "opt", "bloom", "gpt_bigcode", "starcoder2", "mpt"}


# The first transformers release whose DeepSeek V2/V3 attention caches MLA's latent (``expand_kv``, the cache
# updated with the normalized kv_lora_rank latent and the roped key); up to 5.14.1 it caches every head's
# decompressed K and V (transformers 4.57.6, models/deepseek_v2/modeling_deepseek_v2.py:372-379).
HF_MLA_LATENT_CACHE_SINCE = (5, 15)


def mla_caches_latent(engine: str, transformers_version: str | None) -> bool:
    """Whether ``engine`` caches multi-head latent attention's compressed latent (kv_lora_rank + rope dims a
    layer: vLLM, whose MLA spec keeps one 576-wide "head" and no V, ``v1/kv_cache_interface.py``; transformers
    from 5.15) or, as transformers before 5.15 does, every head's decompressed K (qk_nope + qk_rope, the roped
    key expanded to each head) and V (v_head_dim) at the KV dtype. ``transformers_version`` None: unknown,
    taken as before 5.15 (the version gpuwise is developed against, 4.57.6)."""
    if engine != "hf":
        return True
    return transformers_version is not None and _release(transformers_version) >= HF_MLA_LATENT_CACHE_SINCE


def engine_caches_mla_latent(engine: str) -> bool:
    """``mla_caches_latent`` for the transformers installed here: HF generate runs with it."""
    return mla_caches_latent(engine, installed_transformers_version())


@lru_cache(maxsize=1)
def installed_transformers_version() -> str | None:
    try:
        return version("transformers")
    except PackageNotFoundError:
        return None


def _release(version_text: str) -> tuple[int, int]:
    """Major and minor of a version string ("5.15.0.dev0" -> (5, 15)); (0, 0) when it has none."""
    found = re.match(r"\s*v?(\d+)\.(\d+)", version_text)
    return (int(found[1]), int(found[2])) if found else (0, 0)


@dataclass(frozen=True)
class LinearSpec:
    """One kind of nn.Linear in the decoder blocks."""

    name: str             # leaf module name in the HF implementation
    role: str             # canonical role, see ROLE_ALIASES (attention: "attn", MLP: "mlp")
    part: str             # "attn" | "mlp" | "expert" | "shared"
    in_features: int
    out_features: int
    copies_per_layer: int  # experts per layer for routed experts, else 1
    layers: int
    bias: bool = False

    @property
    def params(self) -> int:
        return self.copies_per_layer * self.layers * (self.in_features * self.out_features + self.bias * self.out_features)


@dataclass(frozen=True)
class ParamCounts:
    embedding: int
    attention: int
    mlp: int            # dense MLPs and shared experts
    experts: int        # routed experts (all of them)
    router: int
    norms: int
    lm_head: int        # 0 when tied to the embedding
    total: int
    active: int         # per token: routed experts count top_k / num_experts

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DecoderArch:
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    gated_mlp: bool
    layernorm: bool                 # LayerNorm (weight+bias) instead of RMSNorm
    norms_per_layer: int
    qk_norm: bool
    linears: tuple[LinearSpec, ...]
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_intermediate_size: int = 0
    num_moe_layers: int = 0
    shared_expert_gate: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0           # > 0: multi-head latent attention (DeepSeek V2/V3)
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0         # 0: none
    sliding_layers: int = 0         # layers whose KV cache the window bounds
    lm_head_bias: bool = False
    max_position_embeddings: int = 0
    vllm_max_model_len: int = 0     # the longest prompt + new tokens vLLM starts with (rope scaling counted); 0: unknown
    name: str = field(default="", compare=False)   # the model spec it was loaded for (load_arch), for messages

    # ---- shapes -----------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.num_moe_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def context_tokens(self) -> int:
        """The longest sequence (prompt + new tokens) the config says the model runs, 0: it states none: the length
        vLLM derives from it (``vllm_max_model_len``: the positions times a rope scaling factor, Qwen2.5's yarn ×4
        to 131,072 over 32,768 positions) where known, else ``max_position_embeddings``. The one limit the
        closed form checks a context against (its notes, the longest context that fits)."""
        return self.vllm_max_model_len or self.max_position_embeddings

    def context_words(self) -> str:
        """``context_tokens`` in words, with where it comes from (``8,192 (max_position_embeddings)``)."""
        if self.context_tokens == self.max_position_embeddings:
            return f"{self.context_tokens:,} (max_position_embeddings)"
        return (f"{self.context_tokens:,} (the max_model_len vLLM derives from the config's lengths and rope "
                f"scaling; its max_position_embeddings is {self.max_position_embeddings:,})")

    def expert_share(self, rows: float) -> float:
        """The share of routed experts ``rows`` tokens touch, each picking ``experts_per_token`` of them evenly
        (1 without routed experts): what a decode step's few tokens multiply and read."""
        if not self.is_moe:
            return 1.0
        return 1.0 - (1.0 - self.experts_per_token / self.num_experts) ** rows

    def kv_cache_share(self, ways: int, *, mla_latent: bool = True) -> float:
        """The share of the KV cache each of ``ways`` tensor-parallel GPUs holds: the KV heads split over them,
        each copied where there are fewer heads than GPUs; MLA's latent (``mla_latent``) is whole on every GPU,
        its decompressed K and V split by attention head (``kv_b_proj`` column-wise)."""
        if self.is_mla:
            return 1.0 if mla_latent else 1.0 / min(ways, self.num_heads)
        return 1.0 / min(ways, self.num_kv_heads)

    def tensor_parallel_refusal(self, ways: int) -> str | None:
        """Why ``ways``-way tensor parallelism cannot shard this model (None: it can). vLLM's rule
        (``ModelConfig.verify_with_parallel_config`` and ``QKVParallelLinear``): the attention heads split
        evenly over the GPUs, and the KV heads either split evenly or are copied a whole number of times
        (``ways`` a multiple of them); multi-head latent attention has no KV heads to split."""
        if ways <= 1:
            return None
        if self.num_heads % ways:
            return (f"{ways}-way tensor parallelism needs the {self.num_heads} attention heads to split evenly "
                    f"over {ways} GPUs (vLLM refuses it)")
        kv = self.num_kv_heads
        if not self.is_mla and kv and kv % ways and ways % kv:
            return (f"{ways}-way tensor parallelism needs the {kv} KV heads to split evenly over {ways} GPUs or "
                    f"{ways} to be a multiple of them (vLLM refuses it)")
        return None

    @property
    def q_dim(self) -> int:
        if self.is_mla:
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) per token as attention consumes it, before any GQA expansion."""
        if self.is_mla:
            return self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.num_kv_heads * self.head_dim

    @property
    def v_dim(self) -> int:
        return self.num_heads * self.v_head_dim if self.is_mla else self.kv_dim

    # ---- parameters -------------------------------------------------------------------------
    def param_counts(self) -> ParamCounts:
        h = self.hidden_size
        by_part = {"attn": 0, "mlp": 0, "expert": 0, "shared": 0}
        for lin in self.linears:
            by_part[lin.part] += lin.params
        norm_w = 2 * h if self.layernorm else h
        norms = self.num_layers * self.norms_per_layer * norm_w + norm_w
        if self.qk_norm:
            norms += self.num_layers * 2 * self.head_dim
        if self.is_mla:
            norms += self.num_layers * (self.kv_lora_rank + self.q_lora_rank)
        router = self.num_moe_layers * (h * self.num_experts + (h if self.shared_expert_gate else 0))
        embedding = self.vocab_size * h
        lm_head = 0 if self.tie_word_embeddings else self.vocab_size * h
        lm_head += self.vocab_size if self.lm_head_bias else 0
        total = embedding + by_part["attn"] + by_part["mlp"] + by_part["shared"] + by_part["expert"] + router
        total += norms + lm_head
        active_experts = by_part["expert"] * self.experts_per_token // max(self.num_experts, 1)
        return ParamCounts(
            embedding=embedding, attention=by_part["attn"], mlp=by_part["mlp"] + by_part["shared"],
            experts=by_part["expert"], router=router, norms=norms, lm_head=lm_head, total=total,
            active=total - by_part["expert"] + active_experts,
        )

    def matmul_params_per_token(self) -> int:
        """Weights one token multiplies through in a forward pass: active block linears, routers, LM head
        (the tied embedding matrix counts as the LM head; the input lookup is not a matmul)."""
        pc = self.param_counts()
        return pc.active - pc.embedding - pc.norms - (pc.lm_head - self.vocab_size * self.lm_head_bias) + self.vocab_size * self.hidden_size

    def largest_layer_params(self) -> int:
        """Parameters of the largest single module (DeepSpeed's ``largest_layer_params``)."""
        sizes = [lin.in_features * lin.out_features for lin in self.linears]
        return max(sizes + [self.vocab_size * self.hidden_size])

    def block_params(self) -> int:
        """Parameters of one (average) decoder block; ZeRO-3/FSDP gathers one block at a time."""
        pc = self.param_counts()
        return (pc.total - pc.embedding - pc.lm_head) // self.num_layers

    def linear_params(self, predicate=None) -> int:
        return sum(lin.params for lin in self.linears if predicate is None or predicate(lin))

    def lora_params(self, rank: int, targets: tuple[str, ...] = ()) -> int:
        """Exact LoRA adapter parameter count: r × (in + out) per adapted linear (A is r×in, B is out×r).
        WorkloadError for targets that select no linear, or name a module no model has (check_lora_targets)."""
        check_lora_targets(targets, [lin.name for lin in self.linears], self.name or f"this {self.model_type} model")
        return sum(
            rank * (lin.in_features + lin.out_features) * lin.copies_per_layer * lin.layers
            for lin in self.linears if matches_target(lin, targets)
        )

    # ---- compute ----------------------------------------------------------------------------
    def attention_flops_per_token(self, context_tokens: float) -> float:
        """Forward FLOPs of QKᵀ and A·V for one query token attending to ``context_tokens`` keys."""
        qk_width = self.q_dim
        v_width = self.num_heads * (self.v_head_dim if self.is_mla else self.head_dim)
        return 2.0 * self.num_layers * (qk_width + v_width) * context_tokens

    def forward_flops_per_token(self, context_tokens: float) -> float:
        """2 × active matmul parameters + attention; norms, activations and softmax are ignored (<1%)."""
        return 2.0 * self.matmul_params_per_token() + self.attention_flops_per_token(context_tokens)

    def prefill_flops(self, prompt_tokens: float, batch: int) -> float:
        """Forward FLOPs of a batch of prompts (causal: a token attends to half the prompt on average)."""
        return self.forward_flops_per_token((prompt_tokens + 1) / 2) * prompt_tokens * batch

    def decode_step_flops(self, context_tokens: float, batch: int) -> float:
        """Forward FLOPs of one generated token for each of ``batch`` sequences at ``context_tokens``."""
        return self.forward_flops_per_token(context_tokens) * batch

    # ---- KV cache ---------------------------------------------------------------------------
    def kv_cache_bytes_per_token(self, bytes_per_element: float = 2.0, context_tokens: int | None = None, *,
                                 mla_latent: bool) -> float:
        """Cache bytes one token adds: 2 × kv_heads × head_dim per layer. MLA (``mla_caches_latent`` says which
        an engine keeps): the compressed latent, kv_lora_rank + rope dims a layer (``mla_latent``: vLLM,
        SGLang, transformers ≥ 5.15), or every head's decompressed K (qk_nope + qk_rope) and V (v_head_dim)
        (transformers < 5.15). Sliding-window layers stop growing at the window when ``context_tokens``
        exceeds it (averaged over the context)."""
        if self.is_mla and mla_latent:
            per_layer = self.kv_lora_rank + self.qk_rope_head_dim
        elif self.is_mla:
            per_layer = self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim
        layers = float(self.num_layers)
        if self.sliding_layers and context_tokens and context_tokens > self.sliding_window:
            layers = self.num_layers - self.sliding_layers + self.sliding_layers * self.sliding_window / context_tokens
        return per_layer * layers * bytes_per_element

    def kv_cache_bytes(self, tokens: int, batch: int = 1, bytes_per_element: float = 2.0, *,
                       mla_latent: bool) -> int:
        """2 × layers × kv_heads × head_dim × tokens × batch × bytes (GQA/MQA: kv_heads < heads; MLA:
        ``kv_cache_bytes_per_token``). ``mla_latent`` has no default: the caller passes the engine's answer
        (``mla_caches_latent``), so an MLA cache is never sized by a guess."""
        per_token = self.kv_cache_bytes_per_token(bytes_per_element, tokens, mla_latent=mla_latent)
        return int(round(per_token * tokens * batch))


def matches_target(lin: LinearSpec, targets: tuple[str, ...]) -> bool:
    """Default (no targets, or "all"/"all-linear"): every linear of the blocks. Else a target names a
    role (``q``, ``gate``, ``down``...) or a module's own name (``q_proj``, ``w1``)."""
    return name_matches(lin.name, targets)


def name_matches(leaf_name: str, targets: tuple[str, ...]) -> bool:
    """The one matching rule for the closed form and for real modules (gpuwise.trace.peft)."""
    if not targets or any(t in ("all", "all-linear", "all_linear") for t in targets):
        return True
    return any(t == leaf_name or leaf_name in ROLE_ALIASES.get(t, ()) for t in targets)


def check_lora_targets(targets: tuple[str, ...], linear_names, model: str, shown_names=None) -> None:
    """WorkloadError when ``--lora-targets`` would adapt nothing, or names what no model has (a typo).

    ``linear_names``: the leaf names of the model's block linears (``shown_names``: how the message
    lists them, by default the same). As PEFT, a list may name roles or modules this model lacks
    (``q_proj,k_proj,v_proj,o_proj`` on MLA models adapts ``o_proj``) as long as it selects something;
    a name that is no role and no module of any known architecture must be a module of this one. The
    closed form (DecoderArch.lora_params) and real modules (gpuwise.trace.peft) share the rule."""
    if not targets:
        return
    names = set(linear_names)
    selecting = [t for t in targets if any(name_matches(n, (t,)) for n in names)]
    unknown = [t for t in targets if t not in selecting and t not in _KNOWN_TARGETS]
    if selecting and not unknown:
        return
    shown = ", ".join(dict.fromkeys(linear_names if shown_names is None else shown_names))
    if unknown or len(targets) == 1:
        raise WorkloadError(f"--lora-targets: no module named {(unknown or targets)[0]!r} in {model} "
                            f"(its linear layers: {shown})")
    raise WorkloadError(f"--lora-targets {','.join(targets)}: none names a linear layer of {model} "
                        f"(its linear layers: {shown})")


def _get(cfg: dict, *keys, default=None):
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return value
    return default


def arch_from_config(cfg: dict) -> DecoderArch:
    """Build a DecoderArch from an HF config dict (the language part of multimodal configs)."""
    c = text_config(cfg)
    mt = str(c.get("model_type") or cfg.get("model_type") or "").lower()
    h = int(_get(c, *HIDDEN_KEYS, default=0))
    layers = int(_get(c, *LAYER_KEYS, default=0))
    heads = int(_get(c, *HEAD_KEYS, default=0))
    vocab = int(_get(c, "padded_vocab_size", "vocab_size", default=0))
    if not (h and layers and heads and vocab):
        raise WorkloadError(f"config of model_type {mt!r} lacks hidden_size/num_hidden_layers/num_attention_heads/vocab_size")
    if mt == "chatglm":
        kv_heads = int(c.get("multi_query_group_num", heads)) if c.get("multi_query_attention") else heads
    elif mt == "mpt":     # MPT: grouped-query attention is an attn_config option (kv_n_heads)
        attn = c.get("attn_config") or {}
        gqa = attn.get("attn_type") == "grouped_query_attention"
        kv_heads = int(attn.get("kv_n_heads") or heads) if gqa else heads
    elif mt == "falcon":  # FalconAttention: one K and V head under multi_query (its default), unless the new
        # decoder architecture (40B, 180B), which has num_kv_heads of them
        mqa = c.get("multi_query", True) and not c.get("new_decoder_architecture")
        kv_heads = 1 if mqa else int(c.get("num_kv_heads") or heads)
    elif mt == "gpt_bigcode":   # StarCoder: multi-query attention (one K and V head) unless multi_query is off
        kv_heads = 1 if c.get("multi_query", True) else heads
    else:
        kv_heads = int(_get(c, "num_key_value_heads", default=heads))
    head_dim = int(_get(c, "head_dim", "kv_channels", default=h // heads))
    inter = int(_get(c, "intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim",     # ffn_dim: OPT, XGLM
                     default=int(float(c.get("expansion_ratio") or 4) * h)))   # expansion_ratio: MPT
    gated = mt not in _NON_GATED
    layernorm = mt in _LAYERNORM
    q, kv = heads * head_dim, kv_heads * head_dim
    all_bias = mt in ("phi", "gpt_neox")
    qkv_bias = bool(c.get("attention_bias")) or mt in ("qwen2", "qwen2_moe") or bool(c.get("add_qkv_bias")) or all_bias
    o_bias = bool(c.get("attention_bias")) or all_bias
    mlp_bias = bool(c.get("mlp_bias")) or all_bias or bool(c.get("add_bias_linear"))

    # MoE layout
    n_exp = int(_get(c, "num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    top_k = int(_get(c, "num_experts_per_tok", "moe_topk", default=0) or 0)
    moe_inter = int(_get(c, "moe_intermediate_size", default=inter if mt == "mixtral" else 0) or 0)
    if n_exp:
        if "first_k_dense_replace" in c:
            freq = int(c.get("moe_layer_freq", 1) or 1)
            first = int(c["first_k_dense_replace"])
            moe_layers = sum(1 for i in range(layers) if i >= first and i % freq == 0)
        else:
            step = int(c.get("decoder_sparse_step", 1) or 1)
            only = set(c.get("mlp_only_layers") or [])
            moe_layers = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
    else:
        moe_layers = 0
    dense_layers = layers - moe_layers
    if "n_shared_experts" in c:
        shared_inter = int(c.get("n_shared_experts") or 0) * moe_inter
    else:
        shared_inter = int(c.get("shared_expert_intermediate_size") or 0)

    lin: list[LinearSpec] = []
    mla = int(c.get("kv_lora_rank") or 0)
    nope, rope = int(c.get("qk_nope_head_dim") or 0), int(c.get("qk_rope_head_dim") or 0)
    v_head = int(c.get("v_head_dim") or 0)
    q_lora = int(c.get("q_lora_rank") or 0) if mla else 0
    if mla:
        qk = heads * (nope + rope)
        if q_lora:
            lin += [LinearSpec("q_a_proj", "q", "attn", h, q_lora, 1, layers),
                    LinearSpec("q_b_proj", "q", "attn", q_lora, qk, 1, layers)]
        else:
            lin.append(LinearSpec("q_proj", "q", "attn", h, qk, 1, layers))
        lin += [LinearSpec("kv_a_proj_with_mqa", "qkv", "attn", h, mla + rope, 1, layers),
                LinearSpec("kv_b_proj", "qkv", "attn", mla, heads * (nope + v_head), 1, layers),
                LinearSpec("o_proj", "o", "attn", heads * v_head, h, 1, layers)]
    else:
        fused = {"phi3": ("qkv_proj", "o_proj"), "chatglm": ("query_key_value", "dense"),
                 "gpt_neox": ("query_key_value", "dense"), "baichuan": ("W_pack", "o_proj"),
                 "internlm2": ("wqkv", "wo"), "mpt": ("Wqkv", "out_proj")}.get(mt)
        if fused:
            lin += [LinearSpec(fused[0], "qkv", "attn", h, q + 2 * kv, 1, layers, qkv_bias),
                    LinearSpec(fused[1], "o", "attn", q, h, 1, layers, o_bias)]
        else:
            o_name = "dense" if mt == "phi" else "o_proj"
            lin += [LinearSpec("q_proj", "q", "attn", h, q, 1, layers, qkv_bias),
                    LinearSpec("k_proj", "k", "attn", h, kv, 1, layers, qkv_bias),
                    LinearSpec("v_proj", "v", "attn", h, kv, 1, layers, qkv_bias),
                    LinearSpec(o_name, "o", "attn", q, h, 1, layers, o_bias)]

    def mlp(names: tuple[str, ...], part: str, width: int, copies: int, n_layers: int) -> list[LinearSpec]:
        if n_layers == 0 or width == 0:
            return []
        if not gated:
            return [LinearSpec(names[0], "fc1", part, h, width, copies, n_layers, mlp_bias),
                    LinearSpec(names[1], "down", part, width, h, copies, n_layers, mlp_bias)]
        if len(names) == 2:   # fused gate+up
            return [LinearSpec(names[0], "gate_up", part, h, 2 * width, copies, n_layers, mlp_bias),
                    LinearSpec(names[1], "down", part, width, h, copies, n_layers, mlp_bias)]
        return [LinearSpec(names[0], "gate", part, h, width, copies, n_layers, mlp_bias),
                LinearSpec(names[1], "up", part, h, width, copies, n_layers, mlp_bias),
                LinearSpec(names[2], "down", part, width, h, copies, n_layers, mlp_bias)]

    dense_names = {"phi3": ("gate_up_proj", "down_proj"), "chatglm": ("dense_h_to_4h", "dense_4h_to_h"),
                   "internlm2": ("w1", "w3", "w2"), "phi": ("fc1", "fc2"),
                   "gpt_neox": ("dense_h_to_4h", "dense_4h_to_h"),
                   "mpt": ("up_proj", "down_proj")}.get(mt, ("gate_proj", "up_proj", "down_proj"))
    lin += mlp(dense_names, "mlp", inter, 1, dense_layers)
    expert_names = ("w1", "w3", "w2") if mt == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    lin += mlp(expert_names, "expert", moe_inter, n_exp, moe_layers)
    lin += mlp(("gate_proj", "up_proj", "down_proj"), "shared", shared_inter, 1, moe_layers)

    norms_per_layer = {"gemma2": 4, "gemma3_text": 4, "gemma3": 4, "phi": 1}.get(mt, 2)
    window, sliding = sliding_window_layers(c, mt, layers)
    return DecoderArch(
        model_type=mt, hidden_size=h, num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", cfg.get("tie_word_embeddings", True))),
        gated_mlp=gated, layernorm=layernorm, norms_per_layer=norms_per_layer,
        qk_norm=mt in ("qwen3", "qwen3_moe", "gemma3_text", "gemma3") or bool(c.get("qk_layernorm")),
        linears=tuple(lin), num_experts=n_exp if moe_layers else 0, experts_per_token=top_k,
        moe_intermediate_size=moe_inter, shared_intermediate_size=shared_inter, num_moe_layers=moe_layers,
        shared_expert_gate=mt == "qwen2_moe" and shared_inter > 0, q_lora_rank=q_lora, kv_lora_rank=mla,
        qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=v_head,
        sliding_window=window, sliding_layers=sliding, lm_head_bias=mt == "phi",
        max_position_embeddings=int(_get(c, "max_position_embeddings", "n_positions", "seq_length",
                                         "model_max_length", "max_seq_len", default=0)),
        vllm_max_model_len=vllm_max_model_len(cfg),
    )


def config_with_defaults(cfg: dict) -> tuple[dict, tuple[str, ...]]:
    """A config with the optional fields it leaves out filled as transformers fills them
    (``llm_config.transformers_defaults``, on the language part of a multimodal config), and those fields' names."""
    text = text_config(cfg)
    filled = transformers_defaults(text)
    if not filled:
        return cfg, ()
    text = {**text, **filled}
    return (text if text_config(cfg) is cfg else {**cfg, "text_config": text}), tuple(filled)


def defaulted_note(spec: str) -> str | None:
    """What an estimate says where the model's config left fields out (None: it left none out)."""
    cfg = try_load_decoder_config(spec)
    if cfg is None:
        return None
    filled = transformers_defaults(text_config(cfg))
    if not filled:
        return None
    words = ", ".join(f"{k} {v}" for k, v in filled.items())
    return f"the config leaves out fields; transformers' defaults for its model type taken: {words}"


def vision_tower_note(spec: str) -> str | None:
    """What an estimate says where the model's config is multimodal (a ``vision_config`` beside its
    ``text_config``): the closed form counts the language model only, so the vision tower's weights (its
    parameters, ``vision_tower_params``, where its config gives the sizes) and its images' tokens are not in it.
    None: no vision tower."""
    cfg = try_load_decoder_config(spec)
    if cfg is None or not isinstance(cfg.get("vision_config"), dict):
        return None
    kind = cfg["vision_config"].get("model_type") or "vision"
    params = vision_tower_params(cfg)
    size = f" ({params / 1e9:.2f}B parameters by its vision_config)" if params else ""
    return (f"the language model alone is counted: its {kind} vision tower{size} and the tokens of any image are "
            "not (text prompts only)")


def load_arch(spec: str) -> DecoderArch:
    """The architecture of the decoder LLM a model spec names (WorkloadError when it names none); fields its
    config leaves out as transformers fills them (``config_with_defaults``)."""
    cfg, _ = config_with_defaults(load_config(spec))
    return replace(arch_from_config(cfg), name=spec)


def is_llm(workload) -> bool:
    """True when the workload's model is a decoder-only LLM config the closed form describes."""
    return try_load_decoder_config(workload.model) is not None
