" DL (dlc) source files.
autocmd BufRead,BufNewFile *.dl set filetype=dl
