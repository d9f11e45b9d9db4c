from benchmarks.mutation import main

main()
