import torch

from asrscale.data.tokens import Tokens
from asrscale.decoding.decode import unknown_characters
from asrscale.training.evaluation import error_counts, greedy


def test_greedy_collapses_repeats_and_drops_blanks():
    tokens = Tokens(["<blank>", " ", "a", "b"])
    path = [2, 2, 0, 2, 3, 1, 1, 3, 0, 0]
    log_probs = torch.nn.functional.one_hot(torch.tensor([path]), 4).float().log()
    assert greedy(log_probs, torch.tensor([10]), tokens) == ["aab b"]
    assert greedy(log_probs, torch.tensor([3]), tokens) == ["a"]


def test_error_counts_in_words_and_characters():
    assert error_counts(["a b c", "d"], ["a x c", ""], "word") == (2, 4)
    assert error_counts(["abc"], ["abd"], "char") == (1, 3)


def test_characters_outside_the_token_set_are_counted_and_scored_as_errors():
    tokens = Tokens.from_texts(["a cab"])
    assert unknown_characters(["a cab", "café à", "b"], tokens) == 3  # f, é, à
    assert error_counts(["café"], ["cab"], "char") == (2, 4)
