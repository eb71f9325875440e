"""Generation (``--mode infer --max-new-tokens N``) by the decoders gpuwise traces rather than describes in
closed form (GPT-2, OPT, BLOOM, Falcon, GPT-J, GPT-Neo, CodeGen …: ``decoder_configs._NOT_DECODERS``).

The tracer runs one forward of the prompts, as HF ``generate``'s prefill runs it (``trace.prefill``: one position's
logits where the model takes ``logits_to_keep``). HF ``generate`` then decodes N tokens, one forward each, against
a KV cache of every layer's K and V. Both are modelled with the closed form's own pieces, on the shape read from
the model's config (``decoder.arch_from_config``: layers, KV heads, head width; its activation and training
rules do not apply to these models and are not used):

- memory: the KV cache by the closed form's rule (``DecoderArch.kv_cache_bytes``, at the compute dtype or
  ``--kv-cache-dtype``'s, as ``plan.llm.kv_bytes_per_element`` says) added to the traced forward at the peak (``memory.generation``);
- time: the traced forward is the prefill (time to first token); each new token is the closed form's decode
  step (``runtime.llm.decode_step``: the weights the trace holds and the KV cache read once a token, the GEMMs,
  HF generate's eager host time) at the mean context, composed as ``runtime.llm.generation_time`` does;
- the ``inference`` section of the estimate is the closed form's ``InferenceEstimate``, without the longest
  context and largest batch (each batch size is a trace: ``estimate --max-batch`` searches them).

What is not modelled is refused in one line (PlanError, exit 2), never ignored: generation by a model that is
no decoder-only LM (an encoder-decoder, an encoder, a vision model, a factory), a config whose layer sizes
cannot be read, vLLM (its reservation and CUDA graphs are the closed form's), and prompt + answer past the
model's position table.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.memory.generation import with_kv_cache
from gpuwise.memory.llm_activations import decode_logits_bytes
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan.errors import PlanError
from gpuwise.plan.llm import InferenceEstimate, kv_bytes_per_element
from gpuwise.runtime.llm import decode_step, generation_time
from gpuwise.runtime.model import StepTime
from gpuwise.trace.prefill import generates
from gpuwise.units import format_bytes
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.decoder import DecoderArch, arch_from_config, engine_caches_mla_latent, is_llm
from gpuwise.workload.specs import CAUSAL_LM, SEQ2SEQ_LM, resolve_model_spec

GENERATION_REGIME = "generation"     # runtime.accuracy.REGIMES: no held-out run measures it yet
_INSTEAD = "without it, --mode infer estimates one forward of the batch"


def generation_arch(workload: Workload) -> DecoderArch:
    """The decoder shape a traced workload's generation is modelled from. PlanError (one line: what is modelled,
    what to do instead) where it is not modelled; WorkloadError where prompt + answer is past the model's
    positions (as ``--seq-len`` alone is)."""
    spec = resolve_model_spec(workload.model)
    if spec.task != CAUSAL_LM or spec.hf_config is None:
        kind = "an encoder-decoder model" if spec.task == SEQ2SEQ_LM else "not a decoder-only language model"
        raise PlanError(f"--max-new-tokens: generation is modelled for decoder-only language models; {spec.name} is "
                        f"{kind}: {_INSTEAD}")
    if workload.engine == "vllm":
        raise PlanError(f"--engine vllm: vLLM serving is modelled for the decoder LLMs of the closed form "
                        f"(docs/llm.md); {spec.name} is traced and its generation is modelled as HF generate "
                        "(--engine hf)")
    try:
        arch = replace(arch_from_config(dict(spec.hf_config)), name=spec.name)
    except (WorkloadError, TypeError, ValueError) as exc:
        raise PlanError(f"--max-new-tokens: the KV cache of {spec.name} cannot be sized from its config ({exc}); "
                        f"{_INSTEAD}") from None
    context = workload.tokens_per_sequence + workload.max_new_tokens
    if spec.max_positions and context > spec.max_positions:
        raise WorkloadError(f"--seq-len {workload.tokens_per_sequence} + --max-new-tokens {workload.max_new_tokens} "
                            f"= {context:,} tokens exceeds {spec.name}'s {spec.max_positions:,} positions")
    return arch


def serving_memory_model_refusal(workload: Workload) -> str | None:
    """Why ``--kv-cache-dtype`` or ``--gpu-memory-utilization`` does not apply to ``workload``'s model (None: it
    does, or neither is given); the workload itself checks the job (``workload.model.serving_memory_refusal``). A
    decoder LLM of the closed form takes both; a traced model is never served by vLLM, and keeps a KV cache only
    generating (HF generate, whose cache takes --kv-cache-dtype's bytes)."""
    util_given, dtype_given = workload.gpu_memory_utilization is not None, workload.kv_cache_dtype != "auto"
    if not (util_given or dtype_given) or is_llm(workload):
        return None
    if util_given:
        return (f"--gpu-memory-utilization is vLLM's reservation, modelled for the decoder LLMs of the closed form "
                f"(docs/llm.md); {workload.model} is traced, not served by vLLM")
    if not generates(workload):
        return (f"--kv-cache-dtype: {workload.model} keeps no KV cache in this job (the cache is a decoder's "
                "generation: --mode infer --max-new-tokens N)")
    return None


def kv_cache_note(arch: DecoderArch, bytes_per_element: float, mla_latent: bool) -> str:
    """How a traced decoder's KV cache was sized, in one note."""
    per_token = arch.kv_cache_bytes_per_token(bytes_per_element, mla_latent=mla_latent)
    return (f"generation (HF generate): KV cache from the config, {arch.num_layers} layers × K and V × "
            f"{arch.num_kv_heads} heads × {arch.head_dim} × {bytes_per_element:g} B = {format_bytes(per_token)} a "
            "token; the prefill is the traced forward (the last position's logits where the model takes HF generate's "
            "logits_to_keep, else every position's), the decode steps the closed form's (docs/llm.md)")


def traced_generation(arch: DecoderArch, w: Workload, forward: MemoryEstimate, prefill: StepTime | None,
                      gpu) -> tuple[MemoryEstimate, StepTime | None, InferenceEstimate]:
    """(memory, time, inference) of ``w`` generating on one of its GPUs (each serves its own batch): the traced
    forward of the prompts (``forward``, ``prefill``: None without a GPU or a time) with the KV cache and
    ``w.max_new_tokens`` decode steps."""
    prompt, new, batch = w.tokens_per_sequence, w.max_new_tokens, w.batch_size
    kvb = kv_bytes_per_element(w)     # the compute dtype, or --kv-cache-dtype's (transformers' quantized cache)
    latent = engine_caches_mla_latent(w.engine)     # the cache decode_step reads (an MLA model: per head under HF)
    total_kv = arch.kv_cache_bytes(prompt + new, batch, kvb, mla_latent=latent)
    memory = with_kv_cache(forward, prompt_kv_bytes=arch.kv_cache_bytes(prompt, batch, kvb, mla_latent=latent),
                           total_kv_bytes=total_kv,
                           decode_activation_bytes=int(decode_logits_bytes(arch, batch)))
    memory = replace(memory, notes=memory.notes + (kv_cache_note(arch, kvb, latent),))
    extras = dict(prompt_tokens=prompt, new_tokens=new, batch_size=batch, kv_cache_bytes=total_kv,
                  kv_cache_bytes_per_token=int(round(total_kv / (batch * (prompt + new)))),
                  weights_bytes=forward.weights_bytes, prefill_activation_bytes=forward.activations_bytes)
    if prefill is None or gpu is None:
        return memory, None, InferenceEstimate(**extras)
    d = decode_step(arch, w.with_(num_gpus=1), gpu, weights_bytes=forward.weights_bytes,
                    context_tokens=prompt + new / 2, batch=batch, kv_bytes_per_element=kvb)
    served = generation_time(prefill, d, new_tokens=new, batch=batch, engine=w.engine, regime=GENERATION_REGIME)
    extras.update(ttft_s=served.ttft_s, decode_tokens_per_s=served.decode_tokens_per_s, decode_s=served.decode_s,
                  time_per_output_token_s=d.step_s, decode_tokens_per_s_per_user=1.0 / d.step_s)
    return memory, served.step, InferenceEstimate(**extras)
