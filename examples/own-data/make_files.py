"""Write the own-data example's three files, in the formats the field uses, from the table below.

    python examples/own-data/make_files.py

- ``passages.jsonl``: a passage file in Search-R1's corpus format, ``{"id", "contents": "\\"Title\\"\\ntext"}``;
- ``train.parquet``: training questions as verl rows (Search-R1's: its prompt template, ``reward_model.ground_truth:
  {"target": [...]}``, ``data_source``, ``extra_info``);
- ``test.jsonl``: an evaluation file in FlashRAG JSONL, ``{"id", "question", "golden_answers", "metadata"}``.

The facts are written here (countries, capitals, continents, currencies, languages), so nothing third-party is
committed. The test file asks about countries the training file does not, except that a few of its questions
also sit in the training file, reworded only in case and punctuation, as happens when training sets are merged
from several sources: the qa stage's overlap check finds and drops them (``data/qa/overlap.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# country, capital, continent, currency, an official language
COUNTRIES = [
    ("France", "Paris", "Europe", "euro", "French"),
    ("Germany", "Berlin", "Europe", "euro", "German"),
    ("Italy", "Rome", "Europe", "euro", "Italian"),
    ("Spain", "Madrid", "Europe", "euro", "Spanish"),
    ("Portugal", "Lisbon", "Europe", "euro", "Portuguese"),
    ("Netherlands", "Amsterdam", "Europe", "euro", "Dutch"),
    ("Austria", "Vienna", "Europe", "euro", "German"),
    ("Greece", "Athens", "Europe", "euro", "Greek"),
    ("Finland", "Helsinki", "Europe", "euro", "Finnish"),
    ("Ireland", "Dublin", "Europe", "euro", "Irish"),
    ("Poland", "Warsaw", "Europe", "zloty", "Polish"),
    ("Sweden", "Stockholm", "Europe", "Swedish krona", "Swedish"),
    ("Norway", "Oslo", "Europe", "Norwegian krone", "Norwegian"),
    ("Denmark", "Copenhagen", "Europe", "Danish krone", "Danish"),
    ("Hungary", "Budapest", "Europe", "forint", "Hungarian"),
    ("Czech Republic", "Prague", "Europe", "Czech koruna", "Czech"),
    ("Romania", "Bucharest", "Europe", "leu", "Romanian"),
    ("Switzerland", "Bern", "Europe", "Swiss franc", "German"),
    ("United Kingdom", "London", "Europe", "pound sterling", "English"),
    ("Iceland", "Reykjavik", "Europe", "Icelandic krona", "Icelandic"),
    ("Ukraine", "Kyiv", "Europe", "hryvnia", "Ukrainian"),
    ("Turkey", "Ankara", "Asia", "Turkish lira", "Turkish"),
    ("Japan", "Tokyo", "Asia", "yen", "Japanese"),
    ("China", "Beijing", "Asia", "renminbi", "Mandarin"),
    ("India", "New Delhi", "Asia", "Indian rupee", "Hindi"),
    ("South Korea", "Seoul", "Asia", "won", "Korean"),
    ("Thailand", "Bangkok", "Asia", "baht", "Thai"),
    ("Vietnam", "Hanoi", "Asia", "dong", "Vietnamese"),
    ("Indonesia", "Jakarta", "Asia", "rupiah", "Indonesian"),
    ("Philippines", "Manila", "Asia", "Philippine peso", "Filipino"),
    ("Malaysia", "Kuala Lumpur", "Asia", "ringgit", "Malay"),
    ("Pakistan", "Islamabad", "Asia", "Pakistani rupee", "Urdu"),
    ("Bangladesh", "Dhaka", "Asia", "taka", "Bengali"),
    ("Iran", "Tehran", "Asia", "Iranian rial", "Persian"),
    ("Saudi Arabia", "Riyadh", "Asia", "Saudi riyal", "Arabic"),
    ("Israel", "Jerusalem", "Asia", "shekel", "Hebrew"),
    ("Mongolia", "Ulaanbaatar", "Asia", "tugrik", "Mongolian"),
    ("Nepal", "Kathmandu", "Asia", "Nepalese rupee", "Nepali"),
    ("Egypt", "Cairo", "Africa", "Egyptian pound", "Arabic"),
    ("Nigeria", "Abuja", "Africa", "naira", "English"),
    ("Kenya", "Nairobi", "Africa", "Kenyan shilling", "Swahili"),
    ("Ethiopia", "Addis Ababa", "Africa", "birr", "Amharic"),
    ("Ghana", "Accra", "Africa", "cedi", "English"),
    ("Morocco", "Rabat", "Africa", "Moroccan dirham", "Arabic"),
    ("South Africa", "Pretoria", "Africa", "rand", "Zulu"),
    ("Tanzania", "Dodoma", "Africa", "Tanzanian shilling", "Swahili"),
    ("Senegal", "Dakar", "Africa", "CFA franc", "French"),
    ("Algeria", "Algiers", "Africa", "Algerian dinar", "Arabic"),
    ("Canada", "Ottawa", "North America", "Canadian dollar", "English"),
    ("United States", "Washington, D.C.", "North America", "United States dollar", "English"),
    ("Mexico", "Mexico City", "North America", "Mexican peso", "Spanish"),
    ("Cuba", "Havana", "North America", "Cuban peso", "Spanish"),
    ("Jamaica", "Kingston", "North America", "Jamaican dollar", "English"),
    ("Brazil", "Brasilia", "South America", "real", "Portuguese"),
    ("Argentina", "Buenos Aires", "South America", "Argentine peso", "Spanish"),
    ("Chile", "Santiago", "South America", "Chilean peso", "Spanish"),
    ("Peru", "Lima", "South America", "sol", "Spanish"),
    ("Colombia", "Bogota", "South America", "Colombian peso", "Spanish"),
    ("Australia", "Canberra", "Oceania", "Australian dollar", "English"),
    ("New Zealand", "Wellington", "Oceania", "New Zealand dollar", "English"),
]
TEST_COUNTRIES = {"Portugal", "Hungary", "Iceland", "Thailand", "Mongolia", "Nepal", "Kenya", "Ghana", "Peru",
                  "Cuba", "Finland", "Malaysia"}
# (country, template index) of test questions that also sit in the training file, reworded in case and punctuation
LEAKED = [("Kenya", 0), ("Peru", 1), ("Nepal", 2)]

QUESTIONS = [  # (template, answer column)
    ("What is the capital of {country}?", 1),
    ("Which currency is used in {country}?", 3),
    ("On which continent is {country}?", 2),
    ("{capital} is the capital of which country?", 0),
]
# Search-R1's instruction around the question (its data scripts end the user message with "Question: <q>")
SEARCH_R1_PROMPT = ("Answer the given question. You must conduct reasoning inside <think> and </think> first every "
                    "time you get new information. After reasoning, if you find you lack some knowledge, you can "
                    "call a search engine by <search> query </search> and it will return the top searched results "
                    "between <information> and </information>. You can search as many times as your want. If you "
                    "find no further external knowledge needed, you can directly provide the answer inside "
                    "<answer> and </answer>, without detailed illustrations. For example, <answer> Beijing "
                    "</answer>. Question: {question}\n")


def passages() -> list[dict]:
    """Three passages per country (the country, its capital, its currency) and one per language."""
    rows = []
    for country, capital, continent, currency, language in COUNTRIES:
        rows.append((country, f"{country} is a country in {continent}. Its capital is {capital}, and {language} is an "
                              f"official language there. The currency of {country} is the {currency}."))
        rows.append((capital, f"{capital} is the capital city of {country}, a country in {continent}."))
        rows.append((f"{currency} ({country})", f"The {currency} is the currency used in {country}."))
    languages: dict[str, list[str]] = {}
    for country, *_, language in COUNTRIES:
        languages.setdefault(language, []).append(country)
    for language, countries in languages.items():
        rows.append((f"{language} language", f"{language} is an official language of {', '.join(countries)}."))
    return [{"id": str(i), "contents": f'"{title}"\n{text}'} for i, (title, text) in enumerate(rows)]


def question(row: tuple, template: int) -> tuple[str, str]:
    text, answer_column = QUESTIONS[template]
    return text.format(country=row[0], capital=row[1]), row[answer_column]


def main() -> None:
    with open(HERE / "passages.jsonl", "w", encoding="utf-8") as f:
        for passage in passages():
            f.write(json.dumps(passage, ensure_ascii=False) + "\n")
    by_name = {row[0]: row for row in COUNTRIES}
    train, test = [], []
    for row in COUNTRIES:
        for template in range(len(QUESTIONS)):
            (test if row[0] in TEST_COUNTRIES else train).append(question(row, template))
    train += [(q.lower().rstrip("?"), a) for q, a in (question(by_name[c], t) for c, t in LEAKED)]
    with open(HERE / "test.jsonl", "w", encoding="utf-8") as f:
        for i, (q, a) in enumerate(test):
            f.write(json.dumps({"id": f"test_{i}", "question": q, "golden_answers": [a],
                                "metadata": {"source": "own-data example"}}) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": f"train_{i}", "data_source": "geo", "prompt": [{"role": "user",
                                                                     "content": SEARCH_R1_PROMPT.format(question=q)}],
             "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth": {"target": [a]}},
             "extra_info": {"split": "train", "index": i}} for i, (q, a) in enumerate(train)]
    pq.write_table(pa.Table.from_pylist(rows), HERE / "train.parquet")
    print(f"{len(passages())} passages, {len(train)} training questions, {len(test)} test questions")


if __name__ == "__main__":
    main()
