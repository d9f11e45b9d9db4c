"""The study's protocol, apart from the training it decides: each configuration's grid of rates
and its successive halving (`tuning`), and the runs two studies share (`twins`). The training
loop reads only a rung's halving from it."""
