"""A small English grammar for the built-in corpus: digit strings, commands and short phrases.

A few hundred words, so that a small acoustic model can learn it in minutes, yet enough
combinations that test sentences are mostly unseen in training.
"""

import random

DIGITS = "zero one two three four five six seven eight nine".split()
NUMBERS = (
    DIGITS
    + (
        "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
        "twenty thirty forty fifty sixty seventy eighty ninety hundred"
    ).split()
)
VERBS = "turn switch set open close start stop play pause call show find check move send".split()
DEVICES = (
    "lights lamp heater radio music fan oven kettle television alarm timer door window "
    "blinds camera printer speaker computer phone washer dryer"
).split()
ROOMS = "kitchen bedroom bathroom garage garden office hallway attic basement cellar study".split()
PEOPLE = (
    "mother father sister brother doctor teacher driver nurse neighbour friend "
    "alice bob carol david emma frank grace henry isabel jack karen louis maria nathan olivia peter"
).split()
ADJECTIVES = (
    "red green blue yellow black white small large quick slow quiet loud warm cold bright dark "
    "happy busy early late old new heavy light soft sharp"
).split()
NOUNS = (
    "car train boat plane bird horse river mountain city village garden forest letter parcel "
    "table chair window book song story picture coffee apple bread cheese water ticket bag "
    "meeting concert"
).split()
PLACES = "station airport market school library hospital museum bank bakery harbour park theatre".split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
MONTHS = "january february march april may june july august september october november december".split()
ACTIONS = "bring take buy sell paint find carry wash fix read write watch".split()
TEMPLATE_WORDS = "the a an on off in to for at of is near will saw me please set alarm call meet arrives".split()


def _number(rng: random.Random) -> str:
    return rng.choice(NUMBERS)


def _digit_string(rng):
    return " ".join(rng.choice(DIGITS) for _ in range(rng.randint(3, 7)))


def _command(rng):
    templates = (
        lambda: f"{rng.choice(VERBS)} on the {rng.choice(ROOMS)} {rng.choice(DEVICES)}",
        lambda: f"{rng.choice(VERBS)} off the {rng.choice(DEVICES)} in the {rng.choice(ROOMS)}",
        lambda: f"set the {rng.choice(DEVICES)} to {_number(rng)}",
        lambda: f"set an alarm for {_number(rng)} {_number(rng)}",
        lambda: f"call {rng.choice(PEOPLE)} on {rng.choice(WEEKDAYS)}",
        lambda: f"{rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {rng.choice(DEVICES)}",
    )
    return rng.choice(templates)()


def _phrase(rng):
    templates = (
        lambda: f"the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} is near the {rng.choice(PLACES)}",
        lambda: f"{rng.choice(PEOPLE)} will {rng.choice(ACTIONS)} the {rng.choice(NOUNS)}",
        lambda: f"meet me at the {rng.choice(PLACES)} on {rng.choice(WEEKDAYS)}",
        lambda: f"{rng.choice(PEOPLE)} saw a {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}",
        lambda: f"the {rng.choice(NOUNS)} arrives on the {_number(rng)} of {rng.choice(MONTHS)}",
        lambda: f"please {rng.choice(ACTIONS)} {_number(rng)} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}s",
    )
    return rng.choice(templates)()


def sentence(rng: random.Random) -> str:
    """One sentence: a digit string, a command or a phrase, in lower case."""
    return rng.choices((_digit_string, _command, _phrase), weights=(1, 2, 2))[0](rng)


def vocabulary() -> set[str]:
    """Every word a sentence can hold (plural nouns aside)."""
    lists = (
        NUMBERS,
        VERBS,
        DEVICES,
        ROOMS,
        PEOPLE,
        ADJECTIVES,
        NOUNS,
        PLACES,
        WEEKDAYS,
        MONTHS,
        ACTIONS,
        TEMPLATE_WORDS,
    )
    return {word for words in lists for word in words}
