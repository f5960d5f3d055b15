" DL (dlc) source files. Vimscript, so Neovim 0.7 and Vim read it too.
autocmd BufRead,BufNewFile *.dl set filetype=dl
