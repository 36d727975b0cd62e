from autotune.cli import main

main()
