# ruff: noqa: RUF001  (Chinese sentences use full-width punctuation)
"""Language centring for multilingual-e5-small: what makes an English question find Chinese text.

e5-small places every text near the centroid of its language: on the bilingual corpus a Chinese
query found the English memory it paraphrases 0 times in 32, an English query the Chinese memory
43 times in 118, while same-language queries scored 0.72-0.97 top-1. Subtracting the language's
mean vector (a known fix for multilingual encoders) removes most of that pull: each vector has
``f * mean_zh + (1 - f) * mean_en`` subtracted, ``f`` being the text's share of CJK words, then
is normalised again. English-only text is centred on the English mean and keeps its ranking
among English texts. The means are those of the everyday sentences below, embedded at load as
passages and as queries (the prefixes move vectors too). They were written for this purpose and
share no topic with the benchmark corpus, which is not used to compute them. Embedding them at
every load took 0.5 s (17 s on this shared machine under load), so the four means ship as
``e5_means.npy``, written by ``python -m engram_api.embeddings.e5_languages`` (fp32 arithmetic,
the reference); a test recomputes them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

MEANS_FILE: Final = Path(__file__).with_name("e5_means.npy")

ZH: Final = (
    "今天的天气很好，适合出去散步。",
    "我周末喜欢在家做饭，最拿手的是红烧肉。",
    "这家书店开了二十多年，老板认识每一位常客。",
    "火车晚点了半个小时，我们在站台上等了很久。",
    "她每天早上六点起床跑步。",
    "这部电影的结局让很多观众感到意外。",
    "楼下新开了一家面包店，早上总是排长队。",
    "孩子们在公园里放风筝。",
    "秋天的时候，山上的枫叶全都红了。",
    "他把旧自行车修好了，又骑了好几年。",
    "博物馆周一闭馆，其他时间免费参观。",
    "奶奶种的西红柿今年结得特别多。",
    "这条河流经三个省，最后汇入大海。",
    "音乐会的门票一个小时就卖完了。",
    "我们计划明年春天去云南旅行。",
    "小区的停车位越来越难找了。",
    "他学了三年钢琴，现在能弹不少曲子。",
    "夏天吃西瓜是最开心的事情。",
    "图书馆晚上十点关门。",
    "这道菜要先用大火炒，再用小火慢炖。",
    "足球比赛因为下雨推迟到了下周。",
    "她养的花开得很漂亮，邻居都来看。",
    "地铁新线路通车以后，上班方便多了。",
    "爷爷每天都要看报纸和喝茶。",
    "这座古城的城墙保存得很完整。",
    "超市周末打折，很多人去买水果。",
    "我昨天晚上看书看到很晚。",
    "山顶的风很大，一定要多穿衣服。",
    "他们在海边租了一间小房子过暑假。",
    "这个湖冬天会结很厚的冰。",
    "朋友送了我一盆多肉植物。",
    "下个月学校要举办运动会。",
)
EN: Final = (
    "The weather is lovely today, good for a walk outside.",
    "At the weekend I like cooking at home, mostly stews.",
    "This bookshop has been open for twenty years and the owner knows every regular.",
    "The train was half an hour late, so we waited on the platform.",
    "She gets up at six every morning to go running.",
    "The ending of the film surprised a lot of viewers.",
    "A new bakery opened downstairs and there is always a queue in the morning.",
    "The children are flying kites in the park.",
    "In autumn the maple leaves on the hill all turn red.",
    "He repaired the old bicycle and rode it for several more years.",
    "The museum is closed on Mondays and free on other days.",
    "Grandma's tomato plants gave a huge crop this year.",
    "The river runs through three provinces before reaching the sea.",
    "Concert tickets sold out within an hour.",
    "We are planning a trip to the mountains next spring.",
    "Parking spaces in our neighbourhood are getting hard to find.",
    "He has studied piano for three years and can play quite a few pieces.",
    "Eating watermelon is the best part of summer.",
    "The library closes at ten in the evening.",
    "First fry it over high heat, then let it simmer slowly.",
    "The football match was postponed to next week because of the rain.",
    "Her flowers bloomed so well that the neighbours came to look.",
    "Since the new metro line opened, commuting is much easier.",
    "Grandpa reads the newspaper and drinks tea every day.",
    "The old town walls are very well preserved.",
    "The supermarket has weekend discounts, so many people buy fruit.",
    "I stayed up late reading last night.",
    "It is windy at the summit, so bring warm clothes.",
    "They rented a small house by the sea for the summer holiday.",
    "The lake freezes thick in winter.",
    "A friend gave me a little succulent plant.",
    "The school is holding a sports day next month.",
)

_CJK_CHAR: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN_WORD: Final = re.compile("[A-Za-z]+")
# A Chinese word is about two characters long.
_CHARS_PER_WORD: Final = 2.0


def cjk_share(text: str) -> float:
    """The share of the text's words written in CJK (0 for English, 1 for pure Chinese)."""
    cjk = len(_CJK_CHAR.findall(text)) / _CHARS_PER_WORD
    latin = len(_LATIN_WORD.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def load_means(path: Path = MEANS_FILE) -> npt.NDArray[np.float32]:
    """Query zh, query en, passage zh, passage en means, [4, 384]."""
    means: npt.NDArray[np.float32] = np.load(path, allow_pickle=False).astype(np.float32)
    if means.shape != (4, 384):
        raise ValueError(f"{path}: language means of shape {means.shape}, expected (4, 384)")
    return means


def main() -> None:
    from engram_api.embeddings.multilingual import MultilingualEmbedder

    np.save(MEANS_FILE, MultilingualEmbedder.load_e5(compute="fp32", means=False).language_means())
    print(f"wrote {MEANS_FILE}")


if __name__ == "__main__":
    main()
