"""The estimates, whole: what this machine computes (its calibration), what a request costs on a
modelled cluster (fitted on the studies' own figures), and what that says of a run and of a study
before it is queued. Each module imports only those above it in this list (tests/test_layers.py
holds it):

- `calibration`: this machine's compute, measured, and each run's time predicted from it;
- `fitted`: the fit as recorded (fitted.yaml, made on published.yaml), and a modelled run's band;
- `replay`: an algorithm's requests replayed by stand-in learners, without their arithmetic;
- `validation`: a published figure's setup replayed, and what the model predicts of it;
- `fit`: the shared parameters fitted on the figures (priors.yaml), validated one system out;
- `replayed`: the table of the studies' figures every report shows;
- `plan`: a study's price on a profile, every job of it.

Beneath it lie training, the worlds (whose simulated one keeps time by `asrscale.worlds.clock`),
the models and the configuration; above it, the analysis that reads runs' modelled times with
their bands."""
