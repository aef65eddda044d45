"""Generate mindtune's demo data: a synthetic "tiny world" of short stories.

Everything here is pure Python (stdlib only) and seeded, so the same seed always yields the same
text. The world is fixed (`WORLD`): each of 40 children always has the same coloured object and
always goes to the same place. Two products come out of it:

* a **pretraining corpus** (`generate_corpus`): stories in which 2-4 children appear with their
  facts (who has which coloured object, who went where), a little narrative, and *restatements* of
  those facts in other words ("Mia's kite is blue.", "The blue kite belongs to Mia."), sometimes a
  word-for-word repeat and a small CSV table of the facts. About 10% are chat dialogues rendered
  with the ChatML template the demo tokenizer ships, teaching the template tokens without the
  fine-tuning task.
* a **fine-tuning task** (`generate_qa_split`): alpaca rows that ask a one-word question about a
  short story (an object's colour, who has an object, where someone went). The base model knows the
  facts but has never seen the question format; fine-tuning teaches it to answer.

`python data/make_demo_data.py` writes `data/demo/{train,validation,test}.jsonl`. The model build
script (`models/make_tiny_demo.py`) imports this module to generate its corpus on the fly.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

# --- the world -----------------------------------------------------------------------------------

GIRL_NAMES = (
    "Mia", "Ann", "Lily", "Emma", "Zoe", "Ella", "Lucy", "Ava", "Ruby", "Nora",
    "Ivy", "Rosa", "Kate", "Amy", "Sara", "Lena", "Grace", "Jane", "Nina", "Maya",
)
BOY_NAMES = (
    "Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Noah", "Finn", "Owen", "Luke",
    "Adam", "Dan", "Eli", "Joe", "Paul", "Tim", "Hugo", "Omar", "Ravi", "Carl",
)
OBJECTS = (
    "kite", "ball", "hat", "book", "cup", "box", "bike", "boat", "doll", "drum",
    "bag", "coat", "lamp", "pen", "car", "bell", "bowl", "chair", "clock", "flag",
    "key", "map", "mug", "rope", "scarf", "spoon", "tent", "truck", "vase", "sled",
)
COLORS = (
    "red", "blue", "green", "yellow", "pink", "purple",
    "orange", "black", "white", "brown", "gray", "gold",
)
PLACES = (
    "park", "beach", "school", "market", "farm", "zoo", "lake", "forest", "garden", "library",
    "river", "hill", "town", "shop", "castle", "cave", "bakery", "station", "museum", "pond",
)
NUMBER_WORDS = {2: "two", 3: "three", 4: "four"}
ACTIONS = ("played", "ran", "jumped", "sang", "laughed", "smiled", "danced", "waved", "rested")
MOODS = ("happy", "glad", "tired", "brave", "kind", "sleepy", "excited", "calm", "proud")

# The chat template the demo tokenizer ships (tokenizer_config.json); rendered here by hand so
# this module needs no jinja2.
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

REPEAT_FRACTION = 0.15  # share of stories that repeat their fact sentences word for word
TABLE_FRACTION = 0.4  # share of pretraining stories that end with a CSV table of their facts
QA_INSTRUCTION = "Read the story and answer the question with one word."

# Seeds of the independent streams. Train/validation/test and the pretraining corpus never share one.
WORLD_SEED = 7  # fixes who has what and who goes where
CORPUS_SEED = 1234
HELDOUT_SEED = 4321
SPLIT_SEEDS = {"train": 101, "validation": 202, "test": 303}
SPLIT_SIZES = {"train": 2000, "validation": 200, "test": 200}


@dataclass(frozen=True)
class Character:
    """One person in a story and the facts the story tells about them."""

    name: str
    pronoun: str  # "his" or "her"
    color: str
    obj: str
    place: str


def article(word: str) -> str:
    """'a' or 'an' for the word that follows."""
    return "an" if word[0] in "aeiou" else "a"


def a_thing(character: Character) -> str:
    """'a blue kite' / 'an orange cup'."""
    return f"{article(character.color)} {character.color} {character.obj}"


def build_world(seed: int = WORLD_SEED) -> dict[str, Character]:
    """The tiny world's fixed facts: every child always has the same coloured object and always
    goes to the same place, in every story.

    Fixed facts make the world learnable by a tiny model in a few minutes of CPU pretraining: it
    memorises them (and can also read them in the story). (colour, object) pairs are unique, so
    "Who has the blue kite?" has one answer; object types repeat (a red kite and a blue kite), so
    the colour matters.
    """
    rng = random.Random(seed)
    world: dict[str, Character] = {}
    for name in GIRL_NAMES + BOY_NAMES:
        while True:
            obj, color = rng.choice(OBJECTS), rng.choice(COLORS)
            if all((c.color, c.obj) != (color, obj) for c in world.values()):
                break
        pronoun = "her" if name in GIRL_NAMES else "his"
        world[name] = Character(name, pronoun, color, obj, rng.choice(PLACES))
    return world


WORLD = build_world()


def sample_cast(rng: random.Random, n_characters: int) -> list[Character]:
    """`n_characters` distinct children of the world, in random order."""
    return [WORLD[name] for name in rng.sample(GIRL_NAMES + BOY_NAMES, n_characters)]


# --- sentences -----------------------------------------------------------------------------------

def has_sentence(rng: random.Random, c: Character, first_mention: bool) -> str:
    """First mention of what a character has; some phrasings only fit a character's first line."""
    templates = [
        lambda: f"{c.name} has {a_thing(c)}.",
        lambda: f"{c.name} had {a_thing(c)}.",
        lambda: f"{c.name} got {a_thing(c)}.",
        lambda: f"{c.name} found {a_thing(c)}.",
        lambda: f"{c.name} owned {a_thing(c)}.",
        lambda: f"{c.name} had {article(c.obj)} {c.obj}. The {c.obj} was {c.color}.",
        lambda: f"{c.name} got a new {c.obj}. It was {c.color}.",
        lambda: f"{c.name} loved {c.pronoun} {c.color} {c.obj}.",
    ]
    if first_mention:
        templates.append(lambda: f"There was a child named {c.name}. {c.name} had {a_thing(c)}.")
    return rng.choice(templates)()


def went_sentence(rng: random.Random, c: Character, object_known: bool) -> str:
    """First mention of where a character went; may carry the object once the story has named it."""
    templates = [
        lambda: f"{c.name} went to the {c.place}.",
        lambda: f"{c.name} walked to the {c.place}.",
        lambda: f"{c.name} ran to the {c.place}.",
        lambda: f"One day, {c.name} went to the {c.place}.",
        lambda: f"In the morning, {c.name} went to the {c.place}.",
        lambda: f"Later, {c.name} went to the {c.place}.",
    ]
    if object_known:
        templates.append(lambda: f"{c.name} took the {c.obj} to the {c.place}.")
    return rng.choice(templates)()


def restate_has(rng: random.Random, c: Character) -> str:
    """A later restatement of a possession fact; the blank a model must fill varies."""
    templates = (
        lambda: f"{c.name}'s {c.obj} is {c.color}.",
        lambda: f"{c.name}'s {c.obj} was {c.color}.",
        lambda: f"The {c.color} {c.obj} belongs to {c.name}.",
        lambda: f"The {c.color} {c.obj} is {c.name}'s.",
        lambda: f"The color of {c.name}'s {c.obj} is {c.color}.",
        lambda: f"It was {c.name} who had the {c.color} {c.obj}.",
        lambda: f"{c.name} held {c.pronoun} {c.color} {c.obj}.",
        lambda: f"{c.name} looked at {c.pronoun} {c.color} {c.obj}.",
        lambda: f"The {c.obj} that {c.name} has is {c.color}.",
        lambda: f"{c.name} still had the {c.color} {c.obj}.",
        lambda: f"So {c.name} had {a_thing(c)}.",
    )
    return rng.choice(templates)()


def restate_went(rng: random.Random, c: Character) -> str:
    """A later restatement of where a character went."""
    templates = (
        lambda: f"{c.name} was at the {c.place}.",
        lambda: f"{c.name} had gone to the {c.place}.",
        lambda: f"The {c.place} is where {c.name} went.",
        lambda: f"It was {c.name} who went to the {c.place}.",
        lambda: f"{c.name} liked the {c.place}.",
        lambda: f"{c.name} came home from the {c.place}.",
        lambda: f"At the {c.place}, {c.name} {rng.choice(ACTIONS)}.",
        lambda: f"So {c.name} went to the {c.place}.",
    )
    return rng.choice(templates)()


def narrative_sentence(rng: random.Random, cast: list[Character]) -> str:
    """Filler that mentions characters without stating a fact."""
    a = rng.choice(cast)
    b = rng.choice([c for c in cast if c is not a] or cast)
    templates = (
        lambda: "The sun was warm.",
        lambda: "It was a nice day.",
        lambda: "The sky was clear.",
        lambda: f"{a.name} was {rng.choice(MOODS)}.",
        lambda: f"{a.name} {rng.choice(ACTIONS)}.",
        lambda: f"{a.name} and {b.name} played together.",
        lambda: f"{a.name} said hello to {b.name}.",
        lambda: f"{a.name} smiled at {b.name}.",
        lambda: "They had fun.",
        lambda: f"{a.name} felt {rng.choice(MOODS)}.",
        lambda: f"{a.name} read a story to {b.name}.",
        lambda: f"{a.name} asked {b.name} a question.",
        lambda: f"{b.name} gave a good answer.",
        lambda: f"{a.name} did not say one word.",
        lambda: f"{a.name} told {b.name} a story with one happy word in it.",
    )
    return rng.choice(templates)()


def opening_sentence(rng: random.Random, cast: list[Character]) -> str:
    """How a story starts; sometimes it starts straight with a fact."""
    names = [c.name for c in cast]
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    templates = (
        lambda: "",
        lambda: f"Once upon a time, there were {NUMBER_WORDS[len(cast)]} friends.",
        lambda: f"This is a story about {listed}.",
        lambda: f"{listed} were friends.",
        lambda: "Here is a story.",
    )
    return rng.choice(templates)()


def ending_sentence(rng: random.Random) -> str:
    """How a story ends; sometimes it just stops."""
    return rng.choice(("", "The end.", "They were all happy.", "Then they went home.", "It was a good day."))


def join_sentences(sentences: list[str]) -> str:
    """One paragraph: the non-empty sentences joined by spaces."""
    return " ".join(s for s in sentences if s)


# --- stories -------------------------------------------------------------------------------------

def character_facts(rng: random.Random, c: Character) -> list[str]:
    """One character's two facts, in either order."""
    if rng.random() < 0.6:
        return [has_sentence(rng, c, first_mention=True), went_sentence(rng, c, object_known=True)]
    return [went_sentence(rng, c, object_known=False), has_sentence(rng, c, first_mention=False)]


def fact_sentences(rng: random.Random, cast: list[Character]) -> list[str]:
    """Every character's facts, randomly interleaved (each character's own two keep their order)."""
    queues = [character_facts(rng, c) for c in cast]
    facts = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        facts.append(queue.pop(0))
    return facts


def render_story(rng: random.Random, cast: list[Character], allow_table: bool = True) -> str:
    """A pretraining story: facts, a little narrative, restatements, and sometimes a fact table."""
    facts = fact_sentences(rng, cast)
    body = list(facts)
    if rng.random() < REPEAT_FRACTION:
        body += [rng.choice(("Again:", "Let me say that again.", "Once more:"))] + facts
    if rng.random() < 0.5:
        body.append(narrative_sentence(rng, cast))
    # Every fact is restated at least once, and a couple twice, in a fresh order and phrasing.
    restatements = [restate_has(rng, c) for c in cast] + [restate_went(rng, c) for c in cast]
    restatements += [rng.choice((restate_has, restate_went))(rng, rng.choice(cast)) for _ in range(rng.randint(0, 2))]
    rng.shuffle(restatements)
    body += restatements
    if rng.random() < 0.3:
        body.insert(rng.randint(len(cast), len(body)), narrative_sentence(rng, cast))
    body.append(ending_sentence(rng))
    story = join_sentences([opening_sentence(rng, cast)] + body)
    if allow_table and rng.random() < TABLE_FRACTION:
        story += "\n" + render_table(rng, cast)
    return story


def render_table(rng: random.Random, cast: list[Character]) -> str:
    """The story's facts as a small CSV table (header, then one row per character, shuffled).

    Tables are a second way to restate facts, and their comma-separated cells are where words
    appear without a leading space, as a one-word chat answer does after `assistant\n`.
    """
    attributes = {"name": "name", "thing": "obj", "color": "color", "place": "place"}
    if rng.random() < 0.7:
        others = rng.sample(["thing", "color", "place"], rng.randint(2, 3))
        columns = ["name"] + others
    else:
        columns = ["thing", "color", "name"]
    rows = list(cast)
    rng.shuffle(rows)
    lines = [",".join(columns)]
    lines += [",".join(getattr(c, attributes[col]) for col in columns) for c in rows]
    return "\n".join(lines)


def render_fact_story(rng: random.Random, cast: list[Character]) -> str:
    """The short story of a QA row: the characters' facts, and for small casts an opening and at
    most one line of narrative (four characters' facts alone are long enough)."""
    body = fact_sentences(rng, cast)
    if len(cast) == 4:
        return join_sentences(body)
    if rng.random() < 0.4:
        body.insert(rng.randint(0, len(body)), narrative_sentence(rng, cast))
    return join_sentences([opening_sentence(rng, cast)] + body)


# --- chat ----------------------------------------------------------------------------------------

def render_chatml(messages: list[tuple[str, str]]) -> str:
    """Render (role, content) pairs exactly as the shipped ChatML chat template does."""
    return "".join(f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in messages)


def greeting_exchange(rng: random.Random) -> tuple[str, str]:
    """A user greeting and the assistant's greeting back."""
    user = rng.choice(("Say hello.", "Hello!", "Hi!", "Hi there.", "Good morning!", "Say hi to me."))
    reply = rng.choice((
        "Hello! It is nice to meet you.",
        "Hi! How are you today?",
        "Hello there! I like to tell stories.",
        "Hi! I am happy to see you.",
        "Good day to you! Do you want a story?",
    ))
    return user, reply


def about_me_exchange(rng: random.Random) -> tuple[str, str]:
    """A user asks about the assistant itself (never about a story); the reply is a sentence or two."""
    return rng.choice((
        ("What is your name?", "My name is Tiny. I like to tell stories."),
        ("Who are you?", "I am a small model. I can read and write short stories."),
        ("Where do you live?", "I live inside a computer. It is warm and quiet there."),
        ("What can you do?", "I can tell you a story about a child and a toy."),
        ("What color do you like best?", "I like every color. Red and blue are very nice."),
    ))


def story_exchange(rng: random.Random) -> tuple[str, str]:
    """A user asks for a story (maybe naming its people or object); the assistant tells one."""
    cast = sample_cast(rng, rng.randint(2, 4))
    user = rng.choice((
        lambda: rng.choice((
            "Tell me a story.", "Can you tell me a short story?", "Write a story.",
            "Please read me one story.", "Answer me with a story.",
        )),
        lambda: f"Tell me a story about {cast[0].name}.",
        lambda: f"Tell me a story about {cast[0].name} and {cast[1].name}.",
        lambda: f"Write a story about {a_thing(cast[0])}.",
    ))()
    return user, render_story(rng, cast, allow_table=False)


def render_chat(rng: random.Random) -> str:
    """One chat dialogue (1-2 turns) as ChatML text. Never asks questions about a story."""
    turns = []
    if rng.random() < 0.35:
        turns.append(greeting_exchange(rng))
    if rng.random() < 0.2:
        turns.append(about_me_exchange(rng))
    if not turns or rng.random() < 0.8:
        turns.append(story_exchange(rng))
    if rng.random() < 0.15:
        turns.append(("Say goodbye.", rng.choice(("Goodbye! Have a nice day.", "Bye! See you soon."))))
    messages = [(role, text) for user, reply in turns for role, text in (("user", user), ("assistant", reply))]
    return render_chatml(messages)


# --- corpora -------------------------------------------------------------------------------------

def generate_corpus(seed: int, n_documents: int, chat_fraction: float = 0.1) -> list[str]:
    """Pretraining documents (stories, and about `chat_fraction` chat dialogues), without separators."""
    rng = random.Random(seed)
    documents = []
    for _ in range(n_documents):
        if rng.random() < chat_fraction:
            documents.append(render_chat(rng))
        else:
            documents.append(render_story(rng, sample_cast(rng, rng.randint(2, 4))))
    return documents


def make_qa_row(rng: random.Random) -> dict[str, str]:
    """One alpaca row: a short story, one of three question types, a one-word answer."""
    cast = sample_cast(rng, rng.randint(2, 4))
    story = render_fact_story(rng, cast)
    target = rng.choice(cast)
    kind = rng.randrange(3)
    if kind == 0:
        question, answer = f"What color is {target.name}'s {target.obj}?", target.color
    elif kind == 1:
        question, answer = f"Who has the {target.color} {target.obj}?", target.name
    else:
        question, answer = f"Where did {target.name} go?", target.place
    return {"instruction": QA_INSTRUCTION, "input": f"{story}\nQuestion: {question}", "output": answer}


def generate_qa_split(seed: int, n_rows: int, exclude_inputs: set[str] = frozenset()) -> list[dict[str, str]]:
    """`n_rows` distinct rows whose inputs are not in `exclude_inputs` (the other splits)."""
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    seen = set(exclude_inputs)
    while len(rows) < n_rows:
        row = make_qa_row(rng)
        if row["input"] not in seen:
            seen.add(row["input"])
            rows.append(row)
    return rows


def make_splits() -> dict[str, list[dict[str, str]]]:
    """Train, validation and test splits, each from its own seed, with no input shared between them."""
    splits: dict[str, list[dict[str, str]]] = {}
    used: set[str] = set()
    for name in ("test", "validation", "train"):  # held-out splits first: train yields to them
        splits[name] = generate_qa_split(SPLIT_SEEDS[name], SPLIT_SIZES[name], used)
        used |= {row["input"] for row in splits[name]}
    assert_no_overlap(splits)
    return {name: splits[name] for name in ("train", "validation", "test")}


def assert_no_overlap(splits: dict[str, list[dict[str, str]]]) -> None:
    """Fail loudly if any input appears twice, within or across splits."""
    all_inputs = [row["input"] for rows in splits.values() for row in rows]
    assert len(all_inputs) == len(set(all_inputs)), "duplicate inputs across demo splits"


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    """One JSON object per line, UTF-8, keys in a fixed order, trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_demo_splits(out_dir: Path) -> dict[str, int]:
    """Write the three QA splits; returns the row count of each."""
    splits = make_splits()
    for name, rows in splits.items():
        write_jsonl(out_dir / f"{name}.jsonl", rows)
    return {name: len(rows) for name, rows in splits.items()}


def main(argv: list[str] | None = None) -> None:
    """CLI: write the demo splits (and optionally print a few corpus samples)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent / "demo")
    parser.add_argument("--show-corpus", type=int, default=0, help="print this many corpus documents")
    args = parser.parse_args(argv)
    counts = write_demo_splits(args.out_dir)
    print(f"wrote {counts} to {args.out_dir}")
    for doc in generate_corpus(CORPUS_SEED, args.show_corpus):
        print("---\n" + doc)


if __name__ == "__main__":
    main()
