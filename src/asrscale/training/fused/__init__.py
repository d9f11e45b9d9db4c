"""Learners computed as one: the LSTM cells (`cells`) and their recurrence over time
(`recurrence`), on which N learners' forward and backward passes run as one batched pass
(`learners`)."""
