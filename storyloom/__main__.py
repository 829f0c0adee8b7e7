from storyloom.cli import main

main()
