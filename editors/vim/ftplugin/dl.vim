" Vim filetype plugin for DL (dlc): `#` comments, two-space indentation as `dlc fmt` writes it,
" `gq` within 100 columns, and `:make` running `dlc check` on the file.
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

let s:cpo_save = &cpo
set cpo&vim

setlocal commentstring=#\ %s
setlocal comments=:#
setlocal expandtab shiftwidth=2 softtabstop=2 tabstop=2
setlocal textwidth=100
setlocal formatoptions-=t formatoptions+=croql
" `:make` type-checks the file with `dlc check`; each error and warning lands in the quickfix
" list from dlc's report (`[E0201] Error: message`, then a line with `[ file:line:col ]`).
setlocal makeprg=dlc\ check\ %:S
setlocal errorformat=%E[%*[A-Z0-9]]\ Error:\ %m,%W[%*[A-Z0-9]]\ Warning:\ %m,%Z%.%#[\ %f:%l:%c\ ],%-G%.%#

let b:undo_ftplugin = "setlocal commentstring< comments< expandtab< shiftwidth< softtabstop< tabstop<"
      \ . " textwidth< formatoptions< makeprg< errorformat<"

let &cpo = s:cpo_save
unlet s:cpo_save
