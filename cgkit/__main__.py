from cgkit.cli import main

main()
