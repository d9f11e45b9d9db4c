from asrscale.cli import main

main()
