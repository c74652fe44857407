"""config.json keys known not to change what a decoder computes, each with the reason. Any key that is neither
read by the architecture (models/architectures.py) nor listed here is refused: a key wgraph does not read
but that changes the math would make a silently wrong model.

Built from what transformers (4.x and 5.25) writes into the config.json of Llama, Qwen2, Qwen3, Mistral and
Gemma 2 checkpoints, plus keys other writers add (nanotron's, transformers.js's)."""

from __future__ import annotations

HARMLESS = {
    "architectures": "names the model class; checked against model_type where the architecture is chosen",
    "_name_or_path": "the path or hub id the config was loaded from",
    "transformers_version": "the version of transformers that wrote the file",
    "dtype": "the dtype the weights were saved in (transformers 5); the loader reads each tensor's own dtype "
             "from the safetensors header and the model's dtype is the caller's",
    "torch_dtype": "the same as dtype, as transformers 4 named it",
    "use_cache": "whether transformers' generate keeps a KV cache: the same logits either way",
    "initializer_range": "the spread of the random initialisation for training; loaded weights replace it",
    "attention_dropout": "dropout is off at inference",
    "bos_token_id": "a special token id for tokenizers and generation, not part of the forward pass",
    "eos_token_id": "a special token id (or list) that stops generation, not part of the forward pass",
    "pad_token_id": "a special token id; its embedding row is loaded like any other (padding_idx only "
                    "freezes its gradient in training)",
    "pretraining_tp": "transformers 4 split the projections into this many slices when > 1: the same sums in "
                      "another order (transformers 5 ignores it)",
    "tokenizer_class": "the tokenizer's class",
    "cache_implementation": "the KV cache class transformers' generate uses (Gemma 2's 'hybrid' keeps sliding "
                            "layers in a window-sized ring): the same attention",
    "output_attentions": "what transformers' forward returns besides the logits",
    "output_hidden_states": "what transformers' forward returns besides the logits",
    "return_dict": "the type of transformers' forward result",
    "use_return_dict": "the type of transformers' forward result",
    "id2label": "labels of a classification head, which a causal LM has not",
    "label2id": "labels of a classification head, which a causal LM has not",
    "num_labels": "the size of a classification head, which a causal LM has not",
    "problem_type": "the loss of a classification head, which a causal LM has not",
    "finetuning_task": "a note on what the model was fine-tuned for",
    "torchscript": "a torch export setting",
    "chunk_size_feed_forward": "feed-forward chunking (apply_chunking_to_forward), which none of these "
                               "architectures use",
    "transformers.js_config": "settings for transformers.js",
    "is_llama_config": "a marker nanotron writes into Llama configs",
}

# Keys transformers 4 wrote with PretrainedConfig's defaults into many configs: generation settings and
# encoder-decoder switches. At these values they change nothing; another value would change what transformers'
# generate does (or make the model an encoder-decoder), so it is refused.
HARMLESS_AT_DEFAULT: dict[str, object] = {
    "is_encoder_decoder": False, "is_decoder": False, "add_cross_attention": False, "tie_encoder_decoder": False,
    "cross_attention_hidden_size": None, "pruned_heads": {}, "use_bfloat16": False, "tf_legacy_loss": False,
    "max_length": 20, "min_length": 0, "do_sample": False, "early_stopping": False, "num_beams": 1,
    "num_beam_groups": 1, "diversity_penalty": 0.0, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0,
    "repetition_penalty": 1.0, "length_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
    "bad_words_ids": None, "num_return_sequences": 1, "output_scores": False, "return_dict_in_generate": False,
    "forced_bos_token_id": None, "forced_eos_token_id": None, "remove_invalid_values": False,
    "exponential_decay_length_penalty": None, "suppress_tokens": None, "begin_suppress_tokens": None,
    "prefix": None, "task_specific_params": None, "sep_token_id": None, "decoder_start_token_id": None,
    # nanotron writes this for Llama; transformers ignores it and rotates halves, which is what false means
    "rope_interleaved": False,
    # Qwen2.5 and DeepSeek-R1-Distill-Qwen configs say false: no multimodal RoPE (Qwen2-VL's); transformers' Qwen2
    # never reads it. True would claim position sections that Qwen2's RoPE does not compute, so it is refused
    "use_mrope": False,
}


def harmless(key: str, value) -> bool:
    """Whether `key: value` is known not to change inference."""
    if key in HARMLESS:
        return True
    if key in HARMLESS_AT_DEFAULT:
        want = HARMLESS_AT_DEFAULT[key]
        if isinstance(want, bool) or want is None or isinstance(want, dict):
            return type(value) is type(want) and value == want
        return not isinstance(value, bool) and isinstance(value, (int, float)) and value == want
    return False
