"""The worlds that carry out learners' requests (`ops`): real MPI ranks (`mpi`) or a simulated
cluster (`simulated`) on the cost model (`asrscale.worlds.clock`), and the devices learners
compute on."""
