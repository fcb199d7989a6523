"""Builds a random-weight translation model of a published shape with Hugging Face transformers'
own config classes, and its CTranslate2 float32 conversion.

Usage: make_hf_model.py SHAPE OUT_DIR [--seed N]
  SHAPE    marian-base (OPUS-MT: MarianConfig / MarianMTModel) or nllb-600m (M2M100Config /
           M2M100ForConditionalGeneration), see SHAPES
  OUT_DIR  receives hf/ (config.json, model.safetensors, tokenizer.json: what
           `ct2-transformers-converter` reads) and ct2/ (the float32 conversion by
           ctranslate2.converters.TransformersConverter, the same converter the command runs)

The vocabulary layout and word-level tokenizer are those of tools/make_translation_golden.py
(`vocabulary`, `build_tokenizer`; special tokens where the family puts them, words `w0`, `w1`,
...), so ids are the same in both engines' vocabularies.

Weights (float32, seeded): every Linear weight ~ N(0, (gain / sqrt(fan_in))^2), biases and
LayerNorm betas ~ N(0, 0.1^2), LayerNorm gammas ~ N(1, 0.1^2), the shared embedding
~ N(0, embed_std^2) (x sqrt(d_model) when embedded, so it dominates the residual stream), the
output projection ~ N(0, (3 / sqrt(d_model))^2), cross-attention output projections x0.3
(nearly the same at every step, they would otherwise drown the part of the residual stream that
depends on the previous tokens). Each step's output is then a strongly token-dependent function
of the previous token, and greedy decoding does not collapse onto one repeated token (run.py
reports the distinct tokens of every output; the per-shape gains are the largest tried that keep
about 27 of 32 distinct). The output projection is not tied to the embedding, unlike the
published models: tied, the embedding-dominated state picks its own input token again at every
step. The projection reads the same bytes per step either way. EOS never wins: its output row
is zero, so its logit is 0 (plus, for Marian, a final_logits_bias of -1e4) while the largest of
the other tens of thousands of logits is far above 0; every search therefore runs to its
maximum length in both engines.
"""

import argparse
import gc
import importlib.util
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "tools", "make_translation_golden.py")

# family: the vocabulary layout of make_translation_golden.py; layers per stack.
SHAPES = {
    # Helsinki-NLP/opus-mt-*: post-LN, SiLU, sinusoidal positions in Marian's layout, scaled
    # embeddings, shared embeddings with <pad> last (the decoder start), final_logits_bias.
    "marian-base": dict(family="marian", layers=6, d_model=512, heads=8, ffn=2048, vocab=58101,
                        gain=0.3, embed_std=1.0),
    # facebook/nllb-200-distilled-600M: pre-LN with final norms, ReLU, fairseq sinusoidal
    # positions (offset 2), scaled embeddings, shared embeddings.
    "nllb-600m": dict(family="m2m100", layers=12, d_model=1024, heads=16, ffn=4096,
                      vocab=256206, gain=0.5, embed_std=1.0),
}


def golden_module():
    """tools/make_translation_golden.py, for its vocabulary layout and tokenizer."""
    spec = importlib.util.spec_from_file_location("make_translation_golden", GOLDEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_model(shape):
    """The untrained transformers model of `shape` (dropout off)."""
    from transformers import (M2M100Config, M2M100ForConditionalGeneration, MarianConfig,
                              MarianMTModel)

    common = dict(vocab_size=shape["vocab"], d_model=shape["d_model"],
                  encoder_layers=shape["layers"], decoder_layers=shape["layers"],
                  encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
                  encoder_ffn_dim=shape["ffn"], decoder_ffn_dim=shape["ffn"],
                  max_position_embeddings=512, dropout=0.0, attention_dropout=0.0,
                  activation_dropout=0.0)
    if shape["family"] == "marian":
        pad, eos = shape["vocab"] - 1, 0
        config = MarianConfig(activation_function="swish", scale_embedding=True,
                              share_encoder_decoder_embeddings=True, tie_word_embeddings=False,
                              pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                              **common)
        return MarianMTModel(config).eval()
    config = M2M100Config(activation_function="relu", scale_embedding=True, bos_token_id=0,
                          pad_token_id=1, eos_token_id=2, decoder_start_token_id=2,
                          tie_word_embeddings=False, **common)
    return M2M100ForConditionalGeneration(config).eval()


@torch.no_grad()
def init_weights(model, shape, ids, seed):
    """Overwrites every parameter as the module doc says."""
    g = torch.Generator().manual_seed(seed)

    def normal(t, std, mean=0.0):
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float32).mul_(std).add_(mean))

    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module is not model.lm_head:
            normal(module.weight, shape["gain"] / module.in_features ** 0.5)
            if module.bias is not None:
                normal(module.bias, 0.1)
        elif isinstance(module, torch.nn.LayerNorm):
            normal(module.weight, 0.1, 1.0)
            normal(module.bias, 0.1)
    base = model.model
    normal(base.shared.weight, shape["embed_std"])
    base.shared.weight[ids["<pad>"]] = 0.0
    base.shared.weight[ids["</s>"]] = 0.0
    normal(model.lm_head.weight, 3.0 / shape["d_model"] ** 0.5)
    model.lm_head.weight[ids["</s>"]] = 0.0
    for layer in base.decoder.layers:
        layer.encoder_attn.out_proj.weight *= 0.3
    if shape["family"] == "marian":
        normal(model.final_logits_bias, 0.1)
        model.final_logits_bias[0, ids["</s>"]] = -1e4
    assert model.lm_head.weight.data_ptr() != base.shared.weight.data_ptr()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shape", choices=sorted(SHAPES))
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    shape = SHAPES[a.shape]
    golden = golden_module()
    hf_dir, ct2_dir = os.path.join(a.out, "hf"), os.path.join(a.out, "ct2")
    torch.manual_seed(a.seed)
    model = make_model(shape)
    _, ids = golden.vocabulary(shape)
    init_weights(model, shape, ids, a.seed)
    model.save_pretrained(hf_dir)
    golden.build_tokenizer(shape, hf_dir)
    del model
    gc.collect()
    import ctranslate2

    ctranslate2.converters.TransformersConverter(hf_dir).convert(
        ct2_dir, quantization=None, force=True)


if __name__ == "__main__":
    main()
