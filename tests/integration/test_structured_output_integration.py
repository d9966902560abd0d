"""Structured output on the real model: the greedy grammar sampler and log-probabilities."""

import json

import dspy
import jsonschema
import pytest

from treeqa.signatures.review import ParagraphReview


@pytest.mark.integration
def test_greedy_grammar_sampler_matches_llama_cpp_grammar_first_decoding():
    """Checking the argmax first must choose the same tokens as filtering the whole vocabulary."""
    from treeqa.lm import _greedy_grammar as greedy_grammar
    from treeqa.lm import local_engine

    engine = local_engine()
    llama = engine.llama
    schema = json.dumps({
        "type": "object", "required": ["relevant", "action", "next_query"],
        "properties": {"relevant": {"type": "boolean"}, "action": {"enum": ["accept", "reject", "search"]},
                       "next_query": {"type": "string"}}})
    grammar = engine.grammar_from_schema(schema)
    messages = [{"role": "system", "content": "Judge the paragraph for the question. Reply with a fenced "
                                              "```json block holding relevant, action and next_query."},
                {"role": "user", "content": "Question: Where was Arthur's Magazine published?\nParagraph: "
                                            "Arthur's Magazine was an American literary periodical."}]
    used = []
    patched = llama._init_sampler

    def spy(**kwargs):
        sampler = patched(**kwargs)
        used.append(sampler)
        return sampler

    def decode():
        # from an empty KV cache both times: a prompt resumed from a cached prefix is computed in
        # other batch shapes, and the float differences can flip a near-tie between two tokens
        llama.reset()
        return llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=60, grammar=grammar)

    llama._init_sampler, cache, llama.cache = spy, llama.cache, None
    try:
        fast = decode()
        llama._init_sampler = type(llama)._init_sampler.__get__(llama)  # llama.cpp's full-vocabulary chain
        slow = decode()
    finally:
        llama._init_sampler, llama.cache = patched, cache
    (sampler,) = used
    assert isinstance(sampler, greedy_grammar.GreedyGrammarSampler)
    assert sampler.full_checks >= 1  # the prompt asks for a fence, which the grammar refuses
    text = fast["choices"][0]["message"]["content"]
    assert text == slow["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(text), json.loads(schema))


@pytest.mark.integration
def test_asking_for_log_probabilities_leaves_the_reply_unchanged_and_covers_every_token():
    """The sampler's records are the reply, token for token, and reading them changes nothing."""
    from treeqa.judging.verdicts import LOGPROBS, verdict_probability
    from treeqa.lm import local_engine

    engine = local_engine()
    lm = dspy.LM("local/logprob-test", engine=engine, cache=False, temperature=0.0, num_retries=0)
    review = dspy.Predict(ParagraphReview)
    inputs = {"question": "Where was the director of Jaws born?",
              "paragraphs": ["Jaws (film): Jaws is a 1975 American thriller film directed by Steven Spielberg."]}
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        plain = review(**inputs)
        scored = review(**inputs, config=LOGPROBS)
    assert plain.toDict() == {k: v for k, v in scored.toDict().items() if k != "logprobs"}
    steps = scored.logprobs["content"]
    text = "".join(step["token"] for step in steps)
    assert json.loads(text)["action"] == scored.action
    assert all(step["logprob"] <= 0 and len(step["top_logprobs"]) == LOGPROBS["top_logprobs"] for step in steps)
    assert 0.0 < verdict_probability(scored, "relevant") < 1.0
    assert 0.0 < verdict_probability(scored, "sufficient") < 1.0
