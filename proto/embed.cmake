# cmake -DIN=file -DOUT=file.c -DSYM=name -P embed.cmake: the bytes of IN as
# `const unsigned char SYM[]` and `const size_t SYM_len` in OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by proto/embed.cmake. */\n#include <stddef.h>\n"
     "const unsigned char ${SYM}[] = {\n${bytes}\n};\nconst size_t ${SYM}_len = ${n};\n")
