" `dlc lsp` for Vim through vim-lsp (https://github.com/prabirshrestha/vim-lsp): registered when
" vim-lsp sets up its servers, for `dl` buffers. Without vim-lsp this does nothing.
"   let g:dl_lsp_cmd = ['/path/to/dlc', 'lsp']   " another dlc
"   let g:dl_no_lsp = 1                          " leave it out
if exists('g:loaded_dl_lsp')
  finish
endif
let g:loaded_dl_lsp = 1

function! s:Register() abort
  if get(g:, 'dl_no_lsp', 0)
    return
  endif
  let cmd = get(g:, 'dl_lsp_cmd', ['dlc', 'lsp'])
  if !executable(cmd[0])
    return
  endif
  call lsp#register_server({
        \ 'name': 'dlc',
        \ 'cmd': {server_info -> cmd},
        \ 'allowlist': ['dl'],
        \ })
endfunction

augroup dl_lsp
  autocmd!
  autocmd User lsp_setup call s:Register()
augroup END
