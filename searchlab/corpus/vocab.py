"""Fixed word lists of the synthetic world: occupations, genres, industries, title words.

Everything here is ordinary vocabulary (no proper names); the proper names of
the world are invented by :mod:`searchlab.corpus.names`. Lists are tuples so
that a seeded ``rng.choice`` over them is deterministic.
"""

from __future__ import annotations

# Occupation -> the kind of work such a person creates (None: creates none).
OCCUPATIONS: dict[str, str | None] = {
    "novelist": "book", "poet": "book", "historian": "book", "philosopher": "book", "journalist": "book",
    "film director": "film", "screenwriter": None, "actor": None,
    "composer": "album", "singer": "album", "pianist": "album", "violinist": "album",
    "engineer": None, "entrepreneur": None, "banker": None, "industrialist": None, "architect": None,
    "physicist": None, "chemist": None, "mathematician": None, "astronomer": None, "biologist": None,
    "economist": None, "linguist": None, "physician": None,
    "mountaineer": None, "explorer": None, "painter": None, "sculptor": None,
    "politician": None, "diplomat": None, "lawyer": None,
}
OCCUPATION_LIST: tuple[str, ...] = tuple(OCCUPATIONS)
# Earliest plausible birth year for an occupation; people born before it are given another one.
OCCUPATION_SINCE = {"film director": 1870, "screenwriter": 1870}
# Earliest year a work of each kind appears; creators born too early create none.
WORK_SINCE = {"book": 1500, "film": 1900, "album": 1930}
CLIMBERS: tuple[str, ...] = ("mountaineer", "explorer")
SCIENTISTS: tuple[str, ...] = ("physicist", "chemist", "mathematician", "astronomer", "biologist",
                               "economist", "linguist", "physician", "historian", "philosopher")

# Work kind -> (genre, noun) pairs; rendered as "a crime novel", "a jazz album".
GENRES: dict[str, tuple[tuple[str, str], ...]] = {
    "book": (("crime", "novel"), ("historical", "novel"), ("science fiction", "novel"), ("fantasy", "novel"),
             ("gothic", "novel"), ("adventure", "novel"), ("satirical", "novel"), ("romance", "novel"),
             ("poetry", "collection"), ("short story", "collection")),
    "film": (("drama", "film"), ("comedy", "film"), ("thriller", "film"), ("documentary", "film"),
             ("western", "film"), ("musical", "film"), ("animated", "film"), ("war", "film")),
    "album": (("jazz", "album"), ("folk", "album"), ("rock", "album"), ("classical", "album"),
              ("electronic", "album"), ("pop", "album"), ("blues", "album"), ("choral", "album")),
}
WORK_KINDS: tuple[str, ...] = ("book", "book", "film", "album")  # books are the commonest works
CREATED_VERB = {"book": "written", "film": "directed", "album": "recorded"}
PUBLISHED_PREDICATE_TEXT = {"book": "published", "film": "produced", "album": "released"}
SETTING_PREDICATE = {"book": "set_in", "film": "filmed_in", "album": "recorded_in"}
# Which company industry publishes which kind of work (others are used when none exists).
PUBLISHER_INDUSTRY = {"book": "publishing", "film": "film production", "album": "music recording"}

INDUSTRIES: tuple[str, ...] = (
    "shipbuilding", "textiles", "mining", "pharmaceuticals", "banking", "publishing", "railways", "brewing",
    "software", "aviation", "chemicals", "insurance", "telecommunications", "steel", "film production",
    "music recording", "automotive", "food processing", "retail", "energy",
)
# Earliest founding year of a company in the industry (others: any year).
INDUSTRY_SINCE = {"software": 1950, "aviation": 1905, "telecommunications": 1880, "film production": 1900,
                  "music recording": 1900, "automotive": 1890, "energy": 1880, "railways": 1825,
                  "pharmaceuticals": 1830}
FIELDS: tuple[str, ...] = (
    "astronomy", "linguistics", "marine biology", "economics", "mathematics", "medicine", "geology",
    "history", "physics", "chemistry", "agriculture", "oceanography",
)
COMPANY_SUFFIXES: tuple[str, ...] = (
    "Industries", "Group", "& Co.", "Holdings", "Works", "Corporation", "Company", "Brothers", "Trading",
)
INSTITUTE_FORMS: tuple[str, ...] = (
    "{w} Institute", "{w} Institute of {F}", "{c} Academy of {F}", "{w} Society for {F}", "{c} Institute of {F}",
)
UNIVERSITY_FORMS: tuple[str, ...] = (
    "University of {c}", "{w} University", "{c} Institute of Technology", "{w} College", "{s} University",
    "{c} State University",
)
CURRENCY_UNITS: tuple[str, ...] = ("crown", "mark", "florin", "thaler", "ducat", "shilling", "sol", "dram")
AWARD_FORMS: tuple[str, ...] = ("{w} Prize", "{w} Medal", "Order of {w}", "{w} Award", "Grand {w} Prize")
RANGE_FORMS: tuple[str, ...] = ("{w} Range", "{w} Mountains", "{w} Highlands", "{w} Massif")
SEA_FORMS: tuple[str, ...] = ("the {w} Sea", "the Gulf of {w}", "{w} Bay", "the {w} Ocean", "Lake {w}")

TITLE_ADJECTIVES: tuple[str, ...] = (
    "Silent", "Hidden", "Last", "Broken", "Golden", "Distant", "Quiet", "Burning", "Forgotten", "Northern",
    "Crimson", "Endless", "Little", "Long", "Pale", "Wild", "Iron", "Glass", "Secret", "Lonely", "Bright",
    "Dark", "Hollow", "Salt", "Summer", "Autumn", "Evening", "Falling", "Wandering", "Velvet", "Copper",
    "Southern", "Sleeping", "Frozen", "Painted", "Second", "Seventh", "Empty", "Tender", "Restless",
)
TITLE_NOUNS: tuple[str, ...] = (
    "Harbour", "Garden", "Road", "Mirror", "Lantern", "Orchard", "Tower", "Bridge", "Letter", "House",
    "Winter", "Shore", "Voyage", "Kingdom", "Season", "Island", "Song", "Crown", "Feather", "Window",
    "Storm", "Field", "Clock", "Door", "Harvest", "Journey", "Archive", "Compass", "Meadow", "Forest",
    "Shadow", "Station", "Theatre", "Circus", "Lighthouse", "Map", "Ember", "Tide", "Citadel", "Orchestra",
)
TITLE_FORMS: tuple[str, ...] = (
    "The {A} {N}", "{A} {N}s", "The {N} of {W}", "{W}", "A {N} in {W}", "Songs of {W}", "The {W} {N}",
    "{N}s of the {A} {N2}", "Return to {W}", "The {A} {N} of {W}", "{W} {N}s",
)

# Words that title forms and entity name forms put around invented words; a look-alike
# name changes an invented word, never one of these.
FIXED_WORDS: frozenset[str] = frozenset(
    {"The", "A", "of", "in", "the", "for", "to", "Songs", "Return", "River", "Mount", "Peak", "University",
     "College", "Institute", "Technology", "State", "Academy", "Society", "&", "Co."}
    | set(TITLE_ADJECTIVES) | set(TITLE_NOUNS) | {n + "s" for n in TITLE_NOUNS}
    | set(COMPANY_SUFFIXES) | {f.title() for f in FIELDS} | {w for f in FIELDS for w in f.title().split()}
)

# Real-world names that syllable soup can produce by chance; generated words equal to one are redrawn.
REAL_NAMES: frozenset[str] = frozenset("""
paris london berlin rome roma madrid lisbon vienna prague moscow tokyo delhi cairo lima quito bogota sofia
athens oslo bern riga minsk kiev kyiv baku doha dubai tunis rabat dakar accra lagos nairobi kabul tehran
dublin boston denver dallas austin houston miami orlando seattle phoenix detroit chicago toronto ottawa
sydney perth darwin hobart milan turin naples venice florence genoa porto seville malaga lyon nice nantes
lille bordeaux hamburg munich bremen dresden leipzig essen bonn basel zurich geneva lucerne salzburg graz
china india japan chad mali peru cuba iran iraq oman togo fiji niger benin gabon kenya nepal laos ghana
malta italy spain france greece israel egypt syria libya sudan yemen qatar chile brazil canada mexico
russia poland norway sweden finland denmark latvia estonia serbia bosnia albania romania bulgaria austria
hungary belgium ireland iceland georgia armenia jordan lebanon kuwait bahrain panama belize bolivia guyana
samoa tonga nauru palau kosovo sahara congo angola zambia malawi rwanda uganda somalia eritrea
anna maria mary john james peter paul mark luke adam eva eve sara sarah laura maria elena lena nina tina
lisa rosa vera olga ivan igor boris oscar victor hugo max leon noah liam emma mia ella lucas mateo dan
tom tim sam ben ted ron don rob bob carl karl eric erik alan alana nora dora kate mila tara lara dina
smith jones brown miller davis wilson moore taylor thomas jackson white harris martin thompson garcia
lopez lee walker hall allen young king wright hill scott green baker adams nelson carter mitchell
roberts turner phillips campbell parker evans edwards collins stewart morris rogers reed cook morgan
bell murphy bailey rivera cooper richardson cox howard ward torres peterson gray ramirez watson brooks
kelly sanders price bennett wood barnes ross henderson coleman jenkins perry powell long patterson
hughes flores washington butler simmons foster gonzales bryant alexander russell griffin diaz hayes
""".split())

# Genre -> the noun a work of that genre is called by ("novel", "collection", "film", "album").
GENRE_NOUN: dict[str, str] = {genre: noun for pairs in GENRES.values() for genre, noun in pairs}

