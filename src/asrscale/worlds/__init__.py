"""The worlds that carry out learners' requests (`ops`): real MPI ranks (`mpi`) or a simulated cluster
(`simulated`) on a cost model (`costmodel`), and the devices learners compute on."""
