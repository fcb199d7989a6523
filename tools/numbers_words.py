"""English number words for 0 .. 999,999,999: the grammar of the `assets/numbers` model.

A number is written in lower case, words separated by one space:

    number    := "zero" | [group "million" sep] [group "thousand" sep] [tail]
                 (at least one of the three parts, so every n in 1 .. 999,999,999 has a form)
    group     := hundreds | below100                       (a value 1 .. 999)
    hundreds  := unit " hundred" [" " ["and "] below100]
    below100  := unit | teen | tens | tens ("-" | " ") unit
    tail      := ["and "] below100    ("and" only after "million" or "thousand")
               | group
    sep       := " " | ", "            (only when more words follow)
    unit      := one | two | ... | nine
    teen      := ten | eleven | ... | nineteen
    tens      := twenty | thirty | forty | fifty | sixty | seventy | eighty | ninety

and, when the whole number starts with "one hundred", "one thousand" or "one million", that
first "one" may be "a" ("a hundred and five", "a thousand and one", "a million").

Examples: "four hundred and twelve thousand and seven" -> 412007, "nineteen" -> 19,
"two million three hundred thousand" -> 2300000, "forty two" -> 42, "forty-two" -> 42,
"a hundred thousand, and six" -> 100006 (a comma may stand before a tail's "and").

`words(n, rng)` draws one written form of `n`: each example picks how often it uses "and",
hyphens, commas and "a" (always, never or at random per place), so training sees consistent
British and American styles as well as mixed ones. `sample_number(rng)` draws the numbers the
model trains and is evaluated on: a digit count uniform in 1 .. 9, digits uniform, and for half
of the draws a random share of the non-leading digits set to zero (round numbers such as
2,300,000 or 7,000,005 are where the group structure matters most).
"""

UNITS = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

MAX_NUMBER = 999_999_999


class Style:
    """How one example is written: the probability of each optional form."""

    def __init__(self, rng):
        def choice():
            return rng.choice([0.0, 1.0, rng.random()])

        self.rng = rng
        self.and_p = choice()
        self.hyphen_p = choice()
        self.comma_p = choice()
        self.a_p = choice()

    def flip(self, p):
        return self.rng.random() < p


def below100(n, style):
    """Words of 1 <= n <= 99."""
    if n < 10:
        return UNITS[n]
    if n < 20:
        return TEENS[n - 10]
    tens, unit = divmod(n, 10)
    if unit == 0:
        return TENS[tens]
    joiner = "-" if style.flip(style.hyphen_p) else " "
    return TENS[tens] + joiner + UNITS[unit]


def group(n, style):
    """Words of 1 <= n <= 999."""
    hundreds, rest = divmod(n, 100)
    if hundreds == 0:
        return below100(rest, style)
    text = UNITS[hundreds] + " hundred"
    if rest:
        text += " and " if style.flip(style.and_p) else " "
        text += below100(rest, style)
    return text


def words(n, rng):
    """One written form of 0 <= n <= 999,999,999, drawn with `rng` (a `random.Random`)."""
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"{n} is outside 0 .. {MAX_NUMBER}")
    if n == 0:
        return "zero"
    style = Style(rng)
    millions, rest = divmod(n, 1_000_000)
    thousands, units = divmod(rest, 1000)
    parts = []
    for value, scale in ((millions, "million"), (thousands, "thousand")):
        if value:
            parts.append(group(value, style) + " " + scale)
    text = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1 and units == 0
        text += part
        if not last:
            text += ", " if style.flip(style.comma_p) else " "
    if units:
        if parts and units < 100 and style.flip(style.and_p):
            text += "and "
        text += group(units, style)
    if text.startswith("one ") and text.split(" ")[1].rstrip(",") in (
        "hundred", "thousand", "million"
    ):
        if style.flip(style.a_p):
            text = "a" + text[3:]
    return text


def sample_number(rng):
    """A number for training or evaluation, spread over magnitudes (see the module doc)."""
    digits = rng.randint(1, 9)
    value = [rng.randint(1, 9) if digits > 1 else rng.randint(0, 9)]
    value += [rng.randint(0, 9) for _ in range(digits - 1)]
    if rng.random() < 0.5:
        zero_share = rng.random()
        value = value[:1] + [0 if rng.random() < zero_share else d for d in value[1:]]
    return int("".join(map(str, value)))


def parse(text):
    """The value of `text` under the grammar above, or None: checks `words` and the held-out set."""
    tokens = text.replace(",", " ,").replace("-", " - ").split()
    scales = {"million": 1_000_000, "thousand": 1000}
    values = {w: i for i, w in enumerate(UNITS) if w}
    values.update({w: 10 + i for i, w in enumerate(TEENS)})
    values.update({w: 10 * i for i, w in enumerate(TENS) if w})
    if tokens == ["zero"]:
        return 0
    total, current = 0, 0
    for i, token in enumerate(tokens):
        if token in ("and", ",", "-"):
            continue
        if token == "a" and i == 0:
            current = 1
        elif token in values:
            current += values[token]
        elif token == "hundred":
            current *= 100
        elif token in scales:
            total += current * scales[token]
            current = 0
        else:
            return None
    return total + current
