from storyloom.cli.main import main

main()
