"""Make tests/data/smollm2_goldens.json ONCE: what transformers (which dequantizes the GGUF to float32) gives for
SmolLM2-135M-Instruct Q4_1 on one short chat, and what llama.cpp (llama-cpp-python, CPU) gives beside it for
docs/models.md. Run from the repository root: `python tests/data/make_smollm2_goldens.py` (needs transformers,
torch, llama-cpp-python; fetches the model like the tests do)."""

import json
from pathlib import Path

import torch  # before anything that may load a second LLVM
from transformers import AutoModelForCausalLM, AutoTokenizer

from wgraph.models import smollm2  # noqa: E402

MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}]
MAX_NEW_TOKENS = 10  # the answer ends with <|im_end|> after 8
ENCODE = ["Hello world!", " leading space, 123 digits and 3.14", "héllo wörld — ünïcödé ✓ 🙂🚀",
          "<|im_start|>user\nhi<|im_end|>", "tabs\tand\nnew  lines   ", "日本語のテキスト"]


def main():
    path = smollm2.gguf_path()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    prompt = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    ids = tok.apply_chat_template(MESSAGES, tokenize=True, add_generation_prompt=True)["input_ids"]
    assert ids == tok(prompt, add_special_tokens=False)["input_ids"]

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
    new = out[0, len(ids):].tolist()

    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=256, verbose=False)
    cpp_prompt = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    cpp_new = []
    for t in llm.generate(cpp_prompt, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
        cpp_new.append(int(t))
        if t == tok.eos_token_id or len(cpp_new) == MAX_NEW_TOKENS:
            break

    goldens = {
        "made_by": "tests/data/make_smollm2_goldens.py with transformers (GGUF dequantized to float32) and "
                   "llama-cpp-python",
        "messages": MESSAGES,
        "prompt": prompt,
        "prompt_ids": ids,
        "max_new_tokens": MAX_NEW_TOKENS,
        "greedy_ids": new,
        "text": tok.decode(new, skip_special_tokens=True),
        "encode": [{"text": t, "ids": tok(t)["input_ids"]} for t in ENCODE],
        "llama_cpp": {"prompt_ids": cpp_prompt, "greedy_ids": cpp_new,
                      "text": tok.decode(cpp_new, skip_special_tokens=True)},
    }
    dest = Path(__file__).with_name("smollm2_goldens.json")
    dest.write_text(json.dumps(goldens, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(goldens, ensure_ascii=False)[:2000])


if __name__ == "__main__":
    main()
