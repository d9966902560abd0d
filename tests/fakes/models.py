"""A tiny model for the LoRA tests: the 1.5B model's architecture (Qwen2) at a test's size,
with a word-level tokenizer that has ChatML's template."""

from __future__ import annotations

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ["system", "user", "assistant", "question", "passages", "answer", "paris", "rome", "capital", "of",
         "france", "italy", "what", "is", "the", "{", "}", ":", '"', "\n"]


def tiny_tokenizer():
    """A word-level tokenizer with ChatML's template, for the tiny model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<|im_start|>", "<|im_end|>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = CHATML
    return fast


def tiny_model(layers: int = 4, seed: int = 0):
    """A random Qwen2 of 4 layers, 32 wide: the 1.5B model's architecture at a test's size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=False, attn_implementation="sdpa")
    model = Qwen2ForCausalLM(config).float().eval()
    with torch.no_grad():  # at the default 0.02 a 32-wide head cannot move a logit by more than ~1
        model.lm_head.weight.normal_(0, 1.0)
    return model
