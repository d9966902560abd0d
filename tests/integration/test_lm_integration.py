"""The embedded engine on the real model: answers through DSPy, prefix states restored, counted tokens."""

import dspy
import pytest

from treeqa.lm import get_lm, local_engine
from treeqa.settings import get_settings


@pytest.mark.integration
def test_embedded_model_answers_through_predict():
    lm = get_lm("local", cache=False)
    with dspy.context(lm=lm):
        pred = dspy.Predict("question -> answer")(question="What is the capital of France? Answer with one word.")
    assert "paris" in pred.answer.lower()


@pytest.mark.integration
def test_prefix_states_are_restored_without_logits_copies():
    """Alternating system prompts resume from saved prefix states, which hold only the KV state."""
    engine = local_engine()
    llama = engine.llama
    rules = {name: f"You are the {name} step. " + " ".join(f"Rule {i}: be brief and exact." for i in range(30))
             for name in ("answer", "score")}

    def ask(step, question):
        engine._evaluated = 0
        out = llama.create_chat_completion(messages=[{"role": "system", "content": rules[step]},
                                                     {"role": "user", "content": question}],
                                           temperature=0.0, max_tokens=6)
        return out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"], engine._evaluated

    ask("answer", "Who wrote Hamlet?")
    ask("score", "Who wrote Hamlet?")
    text, prompt, computed = ask("answer", "What is the capital of Peru?")
    assert computed < prompt // 4  # the answer step's prefix came back from the RAM cache
    states = list(llama.cache.cache_state.values())
    assert states and all(s.scores.size == 0 for s in states)

    llama.cache.cache_state.clear()
    llama.reset()
    fresh, _, computed_fresh = ask("answer", "What is the capital of Peru?")
    assert computed_fresh >= prompt - 1
    assert fresh == text  # a restored state decodes exactly as a fresh one


@pytest.mark.integration
def test_a_prompts_counted_tokens_are_the_ones_the_model_reads():
    """The demo pool (`one_predictor.demo_pool`) decides what fits the window from this count."""
    engine = local_engine()
    messages = [{"role": "system", "content": "Answer with one word. Fields: `answer`, naïve café"},
                {"role": "user", "content": "Who wrote Hamlet?"}, {"role": "assistant", "content": "Shakespeare"},
                {"role": "user", "content": "What is the capital of Peru?"}]
    out = engine.llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=2)
    assert engine.count_prompt_tokens(messages) == out["usage"]["prompt_tokens"]
    assert engine.context_tokens == get_settings().context_size
