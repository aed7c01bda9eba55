# nache benchmark: Filebench "fileserver" personality (a file server's
# mixed traffic).
#
# Per loop: create and write a whole file, append to one, read one whole,
# delete one, stat one; directories of ~$meandirwidth entries.
# bench/driver/fbdriver.py rewrites the `set` lines with the chosen scale
# (full: 1000 files of 128 KiB and 16 threads instead of 10000 and 50) and
# drops `run` (see webserver.f).

set $dir=/tmp
set $nfiles=10000
set $meandirwidth=20
set $meanfilesize=128k
set $nthreads=50
set $iosize=1m
set $meanappendsize=16k

define fileset name=bigfileset,path=$dir,size=$meanfilesize,entries=$nfiles,dirwidth=$meandirwidth,prealloc=80,reuse

define process name=filereader,instances=1
{
  thread name=filereaderthread,memsize=1m,instances=$nthreads
  {
    flowop createfile name=createfile1,filesetname=bigfileset,fd=1
    flowop writewholefile name=wrtfile1,srcfd=1,fd=1,iosize=$iosize
    flowop closefile name=closefile1,fd=1
    flowop openfile name=openfile1,filesetname=bigfileset,fd=1
    flowop appendfilerand name=appendfilerand1,iosize=$meanappendsize,fd=1
    flowop closefile name=closefile2,fd=1
    flowop openfile name=openfile2,filesetname=bigfileset,fd=1
    flowop readwholefile name=readfile1,fd=1,iosize=$iosize
    flowop closefile name=closefile3,fd=1
    flowop deletefile name=deletefile1,filesetname=bigfileset
    flowop statfile name=statfile1,filesetname=bigfileset
  }
}

echo "fileserver personality (nache bench) loaded"
run 60
