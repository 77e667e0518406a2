"""Renamed copies of demonstrations: whole titles swapped consistently, and the training set they extend."""

from __future__ import annotations

import json
import random

import pytest

from searchlab.agent.protocol import DemoStep, instruction, render_demonstration
from searchlab.model import bootstrap_tiny, load_model
from searchlab.params import TinyModelParams
from searchlab.retrieval.base import Hit
from searchlab.train.renaming import TitleRenamer, rename_demos
from searchlab.train.sft import demo_datasets, encode_demo

PEOPLE = ["Stimina Rembroumsen", "Lasas Vemez", "Trine Holm", "Malbel Kroust", "Romen Sailler"]
CITIES = ["Althouhelm", "Senneby", "Kelmora", "Vosshorby"]
ORGS = ["Vemez Industries", "Holm Trading Company"]


def _demo(person: str, city: str, split: str = "train") -> dict:
    hits = [Hit("p", f'"{person}"\n{person} was born in {city}.', 9.0), Hit("c", f'"{city}"\n{city} is a town.', 3.0)]
    question = f"Where was {person} born?"
    completion = render_demonstration([DemoStep(f"I need the birthplace of {person}.", f"{person} born", hits)],
                                      f"{person} was born in {city}.", city)
    return {"id": person, "split": split, "question": question, "answers": [city],
            "prompt": instruction(question), "completion": completion}


def test_a_title_becomes_another_of_as_many_words_everywhere_in_the_texts():
    renamer = TitleRenamer(PEOPLE + CITIES + ORGS + ["Vemez"])
    texts = ["Lasas Vemez works for Vemez Industries in Senneby.", "Lasas Vemez was born in Senneby; Sennebyan food."]
    out = renamer.rename(texts, random.Random(1))
    person, org, city = out[0].removesuffix(".").replace(" works for ", "|").replace(" in ", "|").split("|")
    assert person in PEOPLE and person != "Lasas Vemez"
    # the longer title wins over the shorter one inside it, and becomes another two-word title
    assert org in PEOPLE + ORGS and org not in ("Vemez Industries", person)
    assert city in CITIES and city != "Senneby"
    # the same mapping in every text of the call; a title inside a longer word is left alone
    assert out[1] == f"{person} was born in {city}; Sennebyan food."


def test_renaming_is_seeded_and_keeps_a_title_with_no_other_of_its_length():
    renamer = TitleRenamer(["Solo Title Of Four", "Kelmora", "Senneby"])
    texts = ["Solo Title Of Four lies in Kelmora."]
    assert renamer.rename(texts, random.Random(3)) == renamer.rename(texts, random.Random(3))
    assert renamer.rename(texts, random.Random(3)) == ["Solo Title Of Four lies in Senneby."]
    with pytest.raises(ValueError, match="no titles"):
        TitleRenamer(["", " "])


def test_renamed_copies_stay_consistent_demonstrations_of_other_entities():
    demos = [_demo("Stimina Rembroumsen", "Althouhelm"), _demo("Lasas Vemez", "Senneby")]
    copies = rename_demos(demos, TitleRenamer(PEOPLE + CITIES), copies=2, seed=0)
    assert [c["id"] for c in copies] == ["Stimina Rembroumsen", "Lasas Vemez"] * 2
    for original, copy in zip(demos * 2, copies):
        person = next(p for p in PEOPLE if p in copy["prompt"])
        city = copy["completion"].rsplit("<answer>", 1)[1].split("</answer>")[0].strip()
        assert person not in original["prompt"] and city in CITIES and city != original["answers"][0]
        # the copy is the original with the two names swapped, in prompt, query, passages and answer alike
        swap = {original["id"]: person, original["answers"][0]: city}
        expected = [original[k].replace(original["id"], swap[original["id"]])
                    .replace(original["answers"][0], swap[original["answers"][0]]) for k in ("prompt", "completion")]
        assert [copy["prompt"], copy["completion"]] == expected


def test_the_training_set_grows_by_the_renamed_copies_and_dev_stays_original(tmp_path):
    demos = [_demo(p, c) for p, c in zip(PEOPLE, CITIES)] + [_demo("Romen Sailler", "Kelmora", split="dev")]
    demos_jsonl, corpus = tmp_path / "demos.jsonl", tmp_path / "corpus.jsonl"
    demos_jsonl.write_text("".join(json.dumps(d) + "\n" for d in demos))
    corpus.write_text("".join(json.dumps({"id": str(i), "contents": f'"{t}"\n{t} exists.'}) + "\n"
                              for i, t in enumerate(PEOPLE + CITIES)))
    bootstrap_tiny(TinyModelParams(vocab_size=400, hidden_size=32, layers=2, heads=2, kv_heads=1,
                                   intermediate_size=64, max_positions=512),
                   [d["prompt"] + d["completion"] for d in demos], tmp_path / "tiny")
    tokenizer = load_model(str(tmp_path / "tiny"))[1]

    train, dev = demo_datasets(tokenizer, demos_jsonl, 512, renamed_copies=2, corpus_jsonl=corpus, seed=0)
    originals = [encode_demo(tokenizer, d["prompt"], d["completion"], 512)["input_ids"] for d in demos[:4]]
    assert len(train) == 12 and train["input_ids"][:4] == originals
    assert all(copy != original for copy, original in zip(train["input_ids"][4:], originals * 2))
    assert dev["input_ids"] == [encode_demo(tokenizer, demos[4]["prompt"], demos[4]["completion"], 512)["input_ids"]]
    with pytest.raises(ValueError, match="renamed_copies needs the corpus"):
        demo_datasets(tokenizer, demos_jsonl, 512, renamed_copies=1)


def test_sft_buckets_keep_only_the_demonstrations_of_those_buckets(tmp_path):
    demos = [_demo(p, c) for p, c in zip(PEOPLE, CITIES)]
    demos_jsonl = tmp_path / "demos.jsonl"
    demos_jsonl.write_text("".join(json.dumps(d) + "\n" for d in demos))
    buckets = ["easy", "hard", "easy", "medium"]
    (tmp_path / "train.jsonl").write_text("".join(
        json.dumps({"id": d["id"], "question": d["question"], "answers": d["answers"], "features": {"bucket": b}})
        + "\n" for d, b in zip(demos, buckets)))
    bootstrap_tiny(TinyModelParams(vocab_size=400, hidden_size=32, layers=2, heads=2, kv_heads=1,
                                   intermediate_size=64, max_positions=512),
                   [d["prompt"] + d["completion"] for d in demos], tmp_path / "tiny")
    tokenizer = load_model(str(tmp_path / "tiny"))[1]
    train, _ = demo_datasets(tokenizer, demos_jsonl, 512, buckets=["easy"])
    kept = [encode_demo(tokenizer, demos[i]["prompt"], demos[i]["completion"], 512)["input_ids"] for i in (0, 2)]
    assert train["input_ids"] == kept
    with pytest.raises(ValueError, match="no training demonstrations in sft.buckets"):
        demo_datasets(tokenizer, demos_jsonl, 512, buckets=["medium-rare"])


def test_a_permutation_renames_every_title_into_another_and_restores_it():
    renamer = TitleRenamer(PEOPLE + CITIES + ORGS)
    names = renamer.permutation(random.Random(0))
    assert sorted(names.forward.values()) == sorted(names.forward)  # a bijection of the titles onto themselves
    assert all(len(new.split()) == len(old.split()) for old, new in names.forward.items())
    assert sum(old != new for old, new in names.forward.items()) >= 6
    text = "Lasas Vemez works for Vemez Industries in Senneby; Sennebyan food."
    shown = names.rename(text)
    assert names.restore(shown) == text
    assert shown == (f"{names.forward['Lasas Vemez']} works for {names.forward['Vemez Industries']} in "
                     f"{names.forward['Senneby']}; Sennebyan food.")
    assert renamer.permutation(random.Random(0)) == names and renamer.permutation(random.Random(1)) != names


def test_the_title_pattern_matches_what_a_longest_first_alternation_matches():
    import re

    titles = ["Ada", "Ada King", "Ada Kingsley", "Bo", "Bo (1901)", "K. Ray", "Ray"]
    text = "Ada Kingsley met Ada Kings and Ada King, Bob and Bo (1901) saw K. Ray; Ray, Ada-Bo, Bo (19"
    plain = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(titles, key=lambda t: (-len(t), t))))
                       + r")(?!\w)")
    found = TitleRenamer(titles)._pattern.findall(text)
    assert found == plain.findall(text) == ["Ada Kingsley", "Ada", "Ada King", "Bo (1901)", "K. Ray", "Ray", "Ada",
                                            "Bo", "Bo"]
