import torch

from asrscale.decode import error_counts, greedy
from asrscale.tokens import Tokens


def test_greedy_collapses_repeats_and_drops_blanks():
    tokens = Tokens(["<blank>", " ", "a", "b"])
    path = [2, 2, 0, 2, 3, 1, 1, 3, 0, 0]
    log_probs = torch.nn.functional.one_hot(torch.tensor([path]), 4).float().log()
    assert greedy(log_probs, torch.tensor([10]), tokens) == ["aab b"]
    assert greedy(log_probs, torch.tensor([3]), tokens) == ["a"]


def test_error_counts_in_words_and_characters():
    assert error_counts(["a b c", "d"], ["a x c", ""], "word") == (2, 4)
    assert error_counts(["abc"], ["abd"], "char") == (1, 3)
