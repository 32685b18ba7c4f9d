import pytest

from setgrpo_bench.errors import SpecError
from setgrpo_bench.tasks.checks import build_check
from setgrpo_bench.tasks.response import ResponseView


def met(spec, text):
    return build_check(spec).met(ResponseView(text))


@pytest.mark.parametrize(
    "spec, text, expected",
    [
        ({"type": "keyword_any", "terms": ["zoe", "amara"]}, "Hello Zoë, how are you?", True),
        ({"type": "keyword_any", "terms": ["mg"]}, "10mg is written without space", False),
        ({"type": "keyword_any", "terms": ["cat"]}, "concatenate", False),
        ({"type": "keyword_all", "terms": ["Monday", "7 pm"]}, "See you monday at 7 PM.", True),
        ({"type": "keyword_all", "terms": ["Monday", "7 pm"]}, "See you monday at 7.", False),
        ({"type": "forbidden", "terms": ["amazing"]}, "A fine lamp.", True),
        ({"type": "forbidden", "terms": ["amazing"]}, "An AMAZING lamp.", False),
        ({"type": "entity", "value": "Chloé"}, "Dear chloe, hi.", True),
        ({"type": "regex", "pattern": r"\b30 ?mg\b"}, "Total: 30 mg per day.", True),
        ({"type": "regex", "pattern": r"^\s*-\s*Ana\b"}, "Notes\n- Ana books the venue", True),
        ({"type": "word_count", "max": 3}, "one two three", True),
        ({"type": "word_count", "max": 3}, "one two three four", False),
        ({"type": "word_count", "min": 2, "max": 3}, "one", False),
        ({"type": "ordering", "terms": ["situation", "background"]}, "Situation: x. Background: y.", True),
        ({"type": "ordering", "terms": ["situation", "background"]}, "Background: y. Situation: x.", False),
        ({"type": "ordering", "terms": ["situation", "background"]}, "Situation only.", False),
        ({"type": "count", "unit": "bullets", "exactly": 2}, "Intro.\n- a\n* b\nEnd.", True),
        ({"type": "count", "unit": "bullets", "exactly": 2}, "- a\n- b\n- c", False),
        ({"type": "count", "unit": "numbered", "exactly": 2}, "1. Mix it.\n2) Heat it.", True),
        ({"type": "count", "unit": "sentences", "max": 2}, "One. Two! Three?", False),
        ({"type": "count", "unit": "sentences", "min": 3}, "1. One step.\n2. Two steps. Three.", True),
        ({"type": "count", "unit": "term", "term": "dose", "exactly": 2}, "Dose and dose.", True),
        ({"type": "structure", "kind": "greeting"}, "Dear Ana, welcome.", True),
        ({"type": "structure", "kind": "greeting"}, "Welcome, Ana.", False),
        ({"type": "structure", "kind": "sign_off"}, "Text.\nBest wishes,\nTom", False),
        ({"type": "structure", "kind": "sign_off"}, "Text.\nBest, Tom", True),
        ({"type": "structure", "kind": "question_at_end"}, "Is that clear? ", True),
        ({"type": "structure", "kind": "list"}, "- a\n- b", True),
        ({"type": "complete_sentences"}, "Take two tablets daily. Call us if worried.", True),
        ({"type": "complete_sentences"}, "dear tina the birthday party date tuesday cheers", False),
        ({"type": "complete_sentences"}, "Take two tablets daily. Call us if", False),
        ({"type": "complete_sentences"}, "Dear Ana,\nThe party is on Friday.\nBest, Tom", True),
        ({"type": "complete_sentences"}, "Intro line here.\n- bullet one\n- bullet two\nOrder yours now.", True),
        ({"type": "repetition"}, "take take take the pill", True),
        ({"type": "repetition"}, "Take the pill daily with food and water.", False),
        ({"type": "repetition"}, "call the clinic call the clinic call the clinic now", True),
    ],
)
def test_check_on_hand_examples(spec, text, expected):
    assert met(spec, text) is expected


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"type": "keyword_anyy", "terms": ["a"]}, r"unknown check type 'keyword_anyy'\. Did you mean 'keyword_any'"),
        ({"type": "regex", "pattern": "(unclosed"}, r"pattern: invalid regular expression"),
        ({"type": "word_count", "max": "ten"}, r"max: expected an integer, got 'ten'"),
        ({"type": "keyword_any", "terms": "single"}, r"terms: expected a non-empty list of strings"),
        ({"type": "count", "unit": "pages", "exactly": 1}, r"unit: unknown unit 'pages'"),
        ({"type": "count", "unit": "bullets"}, r"give 'exactly', 'min' or 'max'"),
        ({"type": "structure", "kind": "poem"}, r"kind: unknown kind 'poem'"),
        ({"type": "entity", "value": ""}, r"value: expected a non-empty string"),
        ({"type": "word_count", "max": 3, "maxx": 4}, r"unknown field\(s\) \['maxx'\]"),
        ({"terms": ["a"]}, r"a check must be a mapping with a 'type'"),
    ],
)
def test_bad_check_specs_name_the_field(spec, match):
    with pytest.raises(SpecError, match=match):
        build_check(spec)


def test_check_round_trips_through_its_spec():
    spec = {"type": "count", "unit": "bullets", "min": None, "max": None, "exactly": 3, "term": None}
    assert build_check(spec).to_spec() == spec
