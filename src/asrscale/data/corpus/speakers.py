"""The built-in corpus's speaker ids, apart from its synthesis (the analysis reads them too)."""


def speaker_id(subset: str, variant: str, accent: str, rate: int, pitch: int, index: int) -> str:
    """A speaker's id: its subset, its voice setting and its place in the subset."""
    return f"{subset}_{variant.lower()}_{accent}_{rate}_{pitch}_{index}"


def variant_of(speaker: str) -> str:
    """The voice variant a speaker's id names (`speaker_id`): the speakers of one variant share its
    timbre whatever their accent, rate and pitch, so they are not independent samples of voices."""
    return "_".join(speaker.split("_")[1:-4])
