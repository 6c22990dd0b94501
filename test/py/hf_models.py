"""HuggingFace `transformers` models built from configs (random weights, nothing downloaded),
one training step, and their comparison with eager, parameter by parameter.

Tiny configurations (2 layers, hidden 64, vocab 512) for CPU tests; `widths="real"` gives the
GPU acceptance sizes (GPT-2 768, Llama 1024/2816, BERT 768/3072). Dropout is off so that eager
and compiled runs compute the same function (`dropout=` turns it on in GPT-2, Llama's
attention and BERT, as their default configs have it: 0.1, 0.0 and 0.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

FAMILIES = ("gpt2", "llama", "bert", "opt", "mistral")


def build(family: str, widths: str = "tiny", dropout: float = 0.0) -> torch.nn.Module:
    import transformers as T

    if dropout and family not in ("gpt2", "llama", "bert"):
        raise ValueError(f"dropout= is for gpt2, llama and bert, not {family!r}")
    p = dropout

    real = widths == "real"
    if family == "gpt2":
        h = 768 if real else 64
        config = T.GPT2Config(n_layer=2, n_embd=h, n_head=12 if real else 4, vocab_size=50257 if real else 512,
                              n_positions=1024, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p)
        return T.GPT2LMHeadModel(config)
    if family in ("llama", "mistral"):
        h, inter = (1024, 2816) if real else (64, 176)
        kv = (4 if real else 2) if family == "mistral" else (16 if real else 4)  # Mistral: grouped-query
        cls, cfg = ((T.MistralForCausalLM, T.MistralConfig) if family == "mistral"
                    else (T.LlamaForCausalLM, T.LlamaConfig))
        return cls(cfg(num_hidden_layers=2, hidden_size=h, intermediate_size=inter,
                       num_attention_heads=16 if real else 4, num_key_value_heads=kv,
                       vocab_size=32000 if real else 512, max_position_embeddings=1024, attention_dropout=p))
    if family == "bert":
        h, inter = (768, 3072) if real else (64, 256)
        config = T.BertConfig(num_hidden_layers=2, hidden_size=h, intermediate_size=inter,
                              num_attention_heads=12 if real else 4, vocab_size=30522 if real else 512,
                              hidden_dropout_prob=p, attention_probs_dropout_prob=p)
        return T.BertForMaskedLM(config)
    if family == "opt":
        h = 768 if real else 64
        config = T.OPTConfig(num_hidden_layers=2, hidden_size=h, ffn_dim=4 * h, num_attention_heads=12 if real else 4,
                             word_embed_proj_dim=h, vocab_size=50272 if real else 512, max_position_embeddings=1024,
                             dropout=0.0, attention_dropout=0.0)
        return T.OPTForCausalLM(config)
    if family in MORE_FAMILIES:
        return MORE_FAMILIES[family](T)
    raise ValueError(f"unknown model family {family!r}")


# More architectures at tiny widths (CPU tests): what each adds to the five above is named.
MORE_FAMILIES: dict[str, Callable[[Any], torch.nn.Module]] = {
    # ALiBi biases; a KV cache that concatenates a legacy empty tensor with the keys
    "bloom": lambda T: T.BloomForCausalLM(T.BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=512,
                                                       hidden_dropout=0.0, attention_dropout=0.0)),
    # encoder-decoder; relative position buckets (log, floor, min); RMS-style LayerNorm in float32
    "t5": lambda T: T.T5ForConditionalGeneration(T.T5Config(
        num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, d_ff=176, num_heads=4, vocab_size=512,
        dropout_rate=0.0, decoder_start_token_id=0)),
    # GeGLU, embeddings scaled by sqrt(hidden), (1 + weight) RMSNorm, one KV head
    "gemma": lambda T: T.GemmaForCausalLM(T.GemmaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
        intermediate_size=176, vocab_size=512)),
    # mixture of experts: router softmax, top-k, per-expert gathers and index_add
    "mixtral": lambda T: T.MixtralForCausalLM(T.MixtralConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=176,
        vocab_size=512, num_local_experts=4, num_experts_per_tok=2)),
    # disentangled attention (relative position gathers)
    "deberta2": lambda T: T.DebertaV2ForMaskedLM(T.DebertaV2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256, vocab_size=512,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    # image and text towers, a contrastive loss scaled by exp(logit_scale)
    "clip": lambda T: T.CLIPModel(T.CLIPConfig(
        text_config=dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                         vocab_size=512, max_position_embeddings=64),
        vision_config=dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                           image_size=32, patch_size=8),
        projection_dim=32)),
    # convolutions and BatchNorm in training mode (running statistics updated in place)
    "resnet": lambda T: T.ResNetForImageClassification(T.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10)),
    # a 1-d convolutional audio encoder, cross-attention
    "whisper": lambda T: T.WhisperForConditionalGeneration(T.WhisperConfig(
        encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=512, num_mel_bins=16, max_source_positions=16,
        max_target_positions=64, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        decoder_start_token_id=1, pad_token_id=0, eos_token_id=2, bos_token_id=1)),
    # a selective scan (a sequential loop over the sequence) and a depthwise causal convolution
    "mamba": lambda T: T.MambaForCausalLM(T.MambaConfig(num_hidden_layers=2, hidden_size=64, state_size=8,
                                                       vocab_size=512, expand=2, conv_kernel=4)),
    # tanh soft-capping of attention scores and logits, sliding-window layers, GeGLU
    "gemma2": lambda T: T.Gemma2ForCausalLM(T.Gemma2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=176, vocab_size=512, sliding_window=8, final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0)),
    # ALiBi outside Bloom, fused query-key-value projection with biases
    "falcon": lambda T: T.FalconForCausalLM(T.FalconConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=512, alibi=True,
        new_decoder_architecture=False, multi_query=False, parallel_attn=False, bias=True, hidden_dropout=0.0,
        attention_dropout=0.0)),
    # rotary embedding on a quarter of each head, attention and MLP in parallel off one residual
    "gpt_neox": lambda T: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=176, vocab_size=512,
        rotary_pct=0.25, hidden_dropout=0.0, attention_dropout=0.0)),
    # learned positions with an offset, scaled embeddings, encoder-decoder with cross-attention
    "bart": lambda T: T.BartForConditionalGeneration(T.BartConfig(
        encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=512, max_position_embeddings=128, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True)),
    # shifted windows (rolls, window partitions), a gathered relative position bias, patch merging
    "swin": lambda T: T.SwinForImageClassification(T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=10,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0)),
    # a strided 1-d convolution stack with GroupNorm, a grouped positional convolution, CTC loss
    "wav2vec2": lambda T: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=32,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0)),
    # MoE with a shared expert behind a sigmoid gate
    "qwen2_moe": lambda T: T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=176,
        vocab_size=512, moe_intermediate_size=64, shared_expert_intermediate_size=64, num_experts=4,
        num_experts_per_tok=2)),
    # patch embedding by a strided convolution, a class token, pre-LayerNorm encoder
    "vit": lambda T: T.ViTForImageClassification(T.ViTConfig(
        image_size=32, patch_size=8, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
        intermediate_size=128, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    # depthwise 7x7 convolutions, LayerNorm over channels-last activations, a learned layer scale
    "convnext": lambda T: T.ConvNextForImageClassification(T.ConvNextConfig(
        num_channels=3, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10, layer_scale_init_value=1.0,
        drop_path_rate=0.0)),
    # factorized embeddings (a projection up to the hidden size), one layer's weights shared by all
    "albert": lambda T: T.AlbertForMaskedLM(T.AlbertConfig(
        num_hidden_layers=2, embedding_size=32, hidden_size=64, num_attention_heads=4, intermediate_size=128,
        vocab_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)),
    # interleaved rotary embedding on part of each head, attention and MLP in parallel
    "gptj": lambda T: T.GPTJForCausalLM(T.GPTJConfig(
        n_layer=2, n_embd=64, n_head=4, rotary_dim=8, vocab_size=512, n_positions=128, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0)),
    # partial rotary embedding, LayerNorm on the queries and keys
    "phi": lambda T: T.PhiForCausalLM(T.PhiConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=512,
        partial_rotary_factor=0.5, qk_layernorm=True, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)),
    # NoNorm (an elementwise scale and shift), bottleneck layers, stacked feed-forwards
    "mobilebert": lambda T: T.MobileBertForMaskedLM(T.MobileBertConfig(
        num_hidden_layers=2, hidden_size=64, embedding_size=32, num_attention_heads=4, intermediate_size=64,
        intra_bottleneck_size=32, true_hidden_size=32, vocab_size=512, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)),
    # multi-query attention (one key/value head)
    "gpt_bigcode": lambda T: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(
        n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128, multi_query=True, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0)),
    # ALiBi in a model without biases, LayerNorm without bias
    "mpt": lambda T: T.MptForCausalLM(T.MptConfig(
        n_layers=2, d_model=64, n_heads=4, expansion_ratio=2, vocab_size=512, max_seq_len=128,
        resid_pdrop=0.0, emb_pdrop=0.0, attn_config=dict(attn_pdrop=0, alibi=True))),
}


def example_batch(model: torch.nn.Module, batch: int = 2, seq: int = 32) -> dict[str, Any]:
    """Inputs with labels for one training step of `model`, whatever its modality."""
    g = torch.Generator().manual_seed(1)
    name = type(model).__name__
    if name.endswith("ForImageClassification"):
        return dict(pixel_values=torch.randn(batch, 3, 32, 32, generator=g),
                    labels=torch.randint(0, model.config.num_labels, (batch,), generator=g))
    if name.startswith("Whisper"):
        return dict(input_features=torch.randn(batch, model.config.num_mel_bins, 32, generator=g),
                    labels=torch.randint(3, model.config.vocab_size, (batch, seq // 2), generator=g))
    if name.startswith("Wav2Vec2"):
        return dict(input_values=torch.randn(batch, 1600, generator=g),
                    labels=torch.randint(1, model.config.vocab_size, (batch, 8), generator=g))
    if name.startswith("CLIP"):
        return dict(pixel_values=torch.randn(batch, 3, 32, 32, generator=g), return_loss=True,
                    input_ids=torch.randint(1, model.config.text_config.vocab_size, (batch, seq // 2), generator=g))
    ids = torch.randint(1, model.config.vocab_size, (batch, seq), generator=g)
    return dict(input_ids=ids, labels=ids)


def batch_step(model: torch.nn.Module, run: Callable[..., Any], inputs: dict[str, Any],
               autocast: torch.dtype | None) -> Step:
    """`train_step` for any `example_batch`: the loss the model computes from its labels
    (a language model in float64: cross-entropy in float64 from its logits, which HF's
    `labels=` path casts to float32); `logits` (CLIP: `logits_per_image`); the float buffers
    after the step (BatchNorm's running statistics)."""
    model.zero_grad(set_to_none=True)
    inputs = dict(inputs)
    exact = next(model.parameters()).dtype == torch.float64
    if exact:
        inputs = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                  for k, v in inputs.items()}
    labels = inputs.pop("labels") if exact and type(model).__name__.endswith(("CausalLM", "MaskedLM")) else None
    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        out = run(**inputs)
    loss = out.loss if labels is None else torch.nn.functional.cross_entropy(out.logits.flatten(0, 1),
                                                                            labels.flatten())
    loss.backward()
    logits = out.logits_per_image if hasattr(out, "logits_per_image") else out.logits
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers() if b.is_floating_point()}
    model.zero_grad(set_to_none=True)
    return Step(loss.detach(), logits.detach(), grads, buffers)


@dataclass
class Step:
    loss: torch.Tensor
    logits: torch.Tensor
    grads: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # float buffers after the step


def train_step(model: torch.nn.Module, run: Callable[..., Any], ids: torch.Tensor, autocast: torch.dtype | None,
               backward: bool = True) -> Step:
    """One forward (and backward) with labels = ids; gradients cloned, then cleared. Under
    float16 autocast the loss is scaled by GradScaler's initial 2**16 and the gradients unscaled,
    as float16 training does: unscaled, gradients below float16's range (a logit's gradient is
    about 1 / (tokens x vocabulary)) flush to zero, wherever each implementation rounds."""
    model.zero_grad(set_to_none=True)
    device = ids.device.type
    with torch.autocast(device, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        out = run(input_ids=ids, labels=ids)
    scale = 2.0 ** 16 if autocast is torch.float16 else 1.0
    if backward:
        (out.loss * scale).backward()
    grads = {n: p.grad.detach().clone() / scale for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return Step(out.loss.detach(), out.logits.detach(), grads)


def grad_errors(expected: Step, got: Step) -> dict[str, tuple[float, float]]:
    """Per parameter: (relative error of the gradient's norm, its norm). Gradients whose norm
    is analytically zero (attention key biases: softmax ignores a shift) carry norm ~1e-20."""
    errors = {}
    for name, e in expected.grads.items():
        g = got.grads.get(name)
        if g is None:
            errors[name] = (float("inf"), float(e.norm()))
            continue
        norm = float(e.double().norm())
        errors[name] = (float((g.double() - e.double()).norm()) / max(norm, 1e-30), norm)
    return errors


def exact_float64(model: torch.nn.Module) -> torch.nn.Module:
    """The model in float64 throughout, for comparisons at 1e-9: Llama-family RMSNorm and
    rotary tables compute in float32 by design (`.to(torch.float32)`, `.float()`), and torch's
    float32 math is not correctly rounded (its cos matches the rounded float64 value 95% of the
    time, a float32 sum depends on its order), so no compiler matches it to 1e-9 there. The
    same modules with the same math in the input's dtype replace them; the float32 and bf16
    tests run the models unchanged."""
    model = model.double()
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm") and hasattr(module, "variance_epsilon"):
            module.__class__ = type(f"Float64{name}", (type(module),), {"forward": _rms_norm_forward})
        elif name.endswith("RotaryEmbedding") and hasattr(module, "inv_freq"):
            module.__class__ = type(f"Float64{name}", (type(module),), {"forward": _rotary_forward})
    return model


def _rms_norm_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _rotary_forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = self.inv_freq[None, :, None].to(x.dtype).expand(position_ids.shape[0], -1, 1)
    freqs = (inv_freq @ position_ids[:, None, :].to(x.dtype)).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling
