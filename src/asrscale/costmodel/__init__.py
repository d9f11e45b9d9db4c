"""The cost model, whole: what a request costs on a modelled cluster, fitted on the studies' own
figures, and what it says of a run and of a study before it is queued. Each module imports only
those above it in this list (tests/test_layers.py holds it):

- `clock`: what each request of a simulated run costs on a hardware profile (the world's clock);
- `fitted`: the fit as recorded (fitted.yaml, made on published.yaml), and a modelled run's band;
- `replay`: an algorithm's requests replayed by stand-in learners, without their arithmetic;
- `validation`: a published figure's setup replayed, and what the model predicts of it;
- `fit`: the shared parameters fitted on the figures (priors.yaml), validated one system out;
- `replayed`: the table of the studies' figures every report shows;
- `plan`: a study's price on a profile, every job of it.

Beneath it lie the configuration, the models, the learners and the simulated world (whose clock is
`clock`); above it, the analysis that reads runs' modelled times with their bands."""
