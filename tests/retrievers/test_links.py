"""Title links: the paragraphs a text names by title, as whole words, first mention first."""

import pytest

from treeqa.data.passage import Passage
from treeqa.retrievers.links import TitleLinks, title_key, title_links

CORPUS = [Passage("jaws", "Jaws (film)", "Jaws is a 1975 film directed by Steven Spielberg."),
          Passage("sp", "Steven Spielberg", "Steven Spielberg was born in Cincinnati."),
          Passage("cin", "Cincinnati", "Cincinnati is a city in Ohio."),
          Passage("acdc", "AC/DC", "AC/DC is a rock band."),
          Passage("om", "Om", "Om is a sacred sound.")]


def test_a_text_names_titles_as_whole_words_in_order_of_mention():
    links = TitleLinks(CORPUS)
    assert title_key("Jaws (film)") == "jaws"
    text = "Spielberg's friend from Cincinnati met Steven Spielberg, who liked Jaws and AC DC, om."
    assert [p.id for p in links.named_in(text)] == ["cin", "sp", "jaws", "acdc"]  # "om" is too short to trust
    assert [p.id for p in links.named_in(text, exclude={"sp", "jaws"})] == ["cin", "acdc"]
    assert links.named_in("Cincinnatian jawsome text") == []  # a part of a word names nothing


def test_links_are_built_once_per_retriever_and_need_its_passages():
    class Retriever:
        passages = CORPUS

    retriever = Retriever()
    assert title_links(retriever) is title_links(retriever)
    with pytest.raises(ValueError, match="exposes no passages"):
        title_links(object())
